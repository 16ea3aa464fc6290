package main

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// openInput is the reader of a file flag's value: a.stdin for "-",
// otherwise the file, whose close the caller defers. An unreadable file is
// a usage error naming the flag ("--nccl-log /x: no such file or
// directory", exit 2).
func (a *app) openInput(flag, file string) (io.Reader, func(), error) {
	if file == "-" {
		return a.stdin, func() {}, nil
	}
	f, err := os.Open(file)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, nil, usagef("%s %s: %v", flag, file, pe.Err)
		}
		return nil, nil, usageError{err}
	}
	return f, func() { _ = f.Close() }, nil
}
