package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tour's marking rule. A fenced code block of README.md or of an
// examples/**/README.md whose opening fence comes right after a line
// starting with "<!-- tour" is a tour block: every line of it that is not
// blank and not a "#" comment is one command, run from the top of the
// repository against the dev cluster, as the README tells a newcomer to:
//
//   - "./bin/ginctl ARGS" runs ginctl with GIN_MASTER_HOST naming the
//     current dev cluster. It must exit 0, or N when its trailing comment
//     says "exit N"; a command whose comment says "Ctrl-C" (ginctl watch)
//     must still run after a while and is then interrupted (SIGINT).
//   - "./bin/gin-master --dev ARGS" stops the current dev cluster and starts
//     this one for the lines after it (its --bind, --data-dir and
//     --http-bind moved to free ports and a temporary directory); when it
//     names --http-bind, the web view must answer there. Its comment is
//     not read.
//
// Each file starts on the cluster `make dev` starts (its recipe, read from
// the Makefile). Words are split as sh does for plain words and
// single-quoted arguments; a line that needs more of a shell fails. A line
// starting with ./bin/ in a fenced block that is not a tour block fails too,
// unless the block is marked "<!-- not tour: WHY -->" (hardware, Slurm,
// Docker or root: nothing of that kind is in a tour block), so a new command
// cannot escape the test by being left unmarked.
const (
	tourMarker    = "<!-- tour"
	notTourMarker = "<!-- not tour"
)

// tourCmd is one line of a tour block.
type tourCmd struct {
	where     string // file:line
	line      string // the command as written, its comment cut
	words     []string
	exit      int  // the exit status its comment documents (0 unless "exit N")
	interrupt bool // its comment says Ctrl-C: it runs until interrupted
}

var tourExitRE = regexp.MustCompile(`\bexit (\d+)\b`)

// tourFiles are README.md and every README.md under examples/, in that
// order, relative to the repository root.
func tourFiles(t *testing.T) []string {
	t.Helper()
	var ex []string
	err := filepath.WalkDir("../examples", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "README.md" {
			rel, err := filepath.Rel("..", path)
			if err != nil {
				return err
			}
			ex = append(ex, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(ex)
	return append([]string{"README.md"}, ex...)
}

// splitComment cuts a trailing "# comment" (a # after a blank, outside
// single quotes) off a documented line.
func splitComment(l string) (cmd, comment string) {
	quoted := false
	for i, r := range l {
		switch {
		case r == '\'':
			quoted = !quoted
		case r == '#' && !quoted && i > 0 && (l[i-1] == ' ' || l[i-1] == '\t'):
			return strings.TrimSpace(l[:i]), strings.TrimSpace(l[i+1:])
		}
	}
	return strings.TrimSpace(l), ""
}

// parseTour returns the commands of the tour blocks of the markdown text,
// and the problems of lines that break the marking rule.
func parseTour(name, text string) (cmds []tourCmd, problems []string) {
	lines := strings.Split(text, "\n")
	inFence, tour, exempt := false, false, false
	prev := ""
	for i, raw := range lines {
		l := strings.TrimSpace(raw)
		where := fmt.Sprintf("%s:%d", name, i+1)
		if strings.HasPrefix(l, "```") {
			if !inFence {
				inFence = true
				tour = strings.HasPrefix(prev, tourMarker)
				exempt = strings.HasPrefix(prev, notTourMarker)
			} else {
				inFence = false
			}
			prev = l
			continue
		}
		prev = l
		if !inFence || l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if !tour {
			if strings.HasPrefix(l, "./bin/") && !exempt {
				problems = append(problems, fmt.Sprintf("%s: %q is in a block not marked %s --> (or %s: WHY -->)", where, l, tourMarker, notTourMarker))
			}
			continue
		}
		line, comment := splitComment(l)
		c := tourCmd{where: where, line: line, interrupt: strings.Contains(comment, "Ctrl-C")}
		if m := tourExitRE.FindStringSubmatch(comment); m != nil {
			c.exit, _ = strconv.Atoi(m[1])
		}
		words, err := shellWords(line)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %q: %v", where, line, err))
			continue
		case len(words) == 0 || (words[0] != "./bin/ginctl" && words[0] != "./bin/gin-master"):
			problems = append(problems, fmt.Sprintf("%s: %q: a tour line runs ./bin/ginctl or ./bin/gin-master --dev", where, line))
			continue
		case words[0] == "./bin/gin-master" && !contains(words, "--dev"):
			problems = append(problems, fmt.Sprintf("%s: %q: the tour starts gin-master only with --dev", where, line))
			continue
		}
		c.words = words
		cmds = append(cmds, c)
	}
	return cmds, problems
}

// makeDevLine is the gin-master line of the Makefile's dev recipe, with
// $(BIN) spelled ./bin as the README does.
func makeDevLine(t *testing.T) tourCmd {
	t.Helper()
	b, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "dev:") {
			continue
		}
		for _, r := range lines[i+1:] {
			if !strings.HasPrefix(r, "\t") {
				break
			}
			if s := strings.TrimSpace(r); strings.HasPrefix(s, "$(BIN)/gin-master ") {
				s = "./bin/" + strings.TrimPrefix(s, "$(BIN)/")
				words, err := shellWords(s)
				if err != nil {
					t.Fatalf("Makefile's dev recipe %q: %v", s, err)
				}
				return tourCmd{where: fmt.Sprintf("Makefile:%d (make dev)", i+1), line: s, words: words}
			}
		}
	}
	t.Fatal("the Makefile's dev target runs no $(BIN)/gin-master")
	return tourCmd{}
}

// freeLoopbackPort is a port nothing listens on now.
func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// tourCluster is the dev cluster the tour's lines run against.
type tourCluster struct {
	addr string
	cmd  *exec.Cmd
}

// startTourDev stops cur (when running) and starts the documented
// gin-master --dev line, its listeners moved to free ports and its data
// into a temporary directory, so the test runs beside a make dev.
func startTourDev(t *testing.T, bin string, c tourCmd, cur *tourCluster) *tourCluster {
	t.Helper()
	if cur != nil {
		_ = cur.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cur.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cur.cmd.Process.Kill()
			<-done
			t.Fatalf("%s: the dev cluster before it did not stop within 30 s of SIGTERM", c.where)
		}
	}
	var args []string
	web := ""
	w := c.words[1:]
	for i := 0; i < len(w); i++ {
		name, _, hasValue := strings.Cut(w[i], "=")
		switch name {
		case "--bind", "--data-dir", "--http-bind":
			if !hasValue && i+1 < len(w) {
				i++
			}
			if name == "--http-bind" {
				web = freeLoopbackPort(t)
				args = append(args, "--http-bind", web)
			}
		default:
			args = append(args, w[i])
		}
	}
	addr, cmd, stderr := startDev(t, bin, args...)
	if web != "" {
		url := "http://" + web + "/ui/"
		var last string
		ok := false
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !ok; time.Sleep(100 * time.Millisecond) {
			resp, err := http.Get(url)
			if err != nil {
				last = err.Error()
				continue
			}
			body := new(bytes.Buffer)
			_, _ = body.ReadFrom(resp.Body)
			resp.Body.Close()
			ok = resp.StatusCode == http.StatusOK && strings.Contains(strings.ToLower(body.String()), "<html")
			last = fmt.Sprintf("%s: %.200s", resp.Status, body.String())
		}
		if !ok {
			t.Fatalf("%s: %q names --http-bind, but its web view (here %s) does not answer with a page: %s\n%s", c.where, c.line, url, last, stderr)
		}
	}
	t.Logf("%s: %s (here: master %s)", c.where, c.line, addr)
	return &tourCluster{addr: addr, cmd: cmd}
}

// runTourCtl runs a documented ./bin/ginctl line against the cluster and
// checks its exit status against the one documented next to it.
func runTourCtl(t *testing.T, bin string, c tourCmd, cl *tourCluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "ginctl"), c.words[1:]...)
	cmd.Dir = ".." // the README's commands run at the top of the repository
	env := []string{"GIN_MASTER_HOST=" + cl.addr}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "GIN_MASTER_HOST=") && !strings.HasPrefix(e, "GIN_TLS_") {
			env = append(env, e)
		}
	}
	cmd.Env = env
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if c.interrupt {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			t.Errorf("%s: %q ended by itself (%v) before Ctrl-C, which its comment says stops it:\n%s", c.where, c.line, err, out.String())
			return
		case <-time.After(2 * time.Second):
		}
		_ = cmd.Process.Signal(os.Interrupt)
		err := <-done
		var ee *exec.ExitError
		interrupted := errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT
		if err != nil && !interrupted && !(errors.As(err, &ee) && ee.ExitCode() == c.exit) {
			t.Errorf("%s: %q after Ctrl-C: %v, want it stopped by the interrupt:\n%s", c.where, c.line, err, out.String())
		}
		t.Logf("%s: %s: ran until interrupted", c.where, c.line)
		return
	}
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s: %q: %v", c.where, c.line, err)
	}
	if ctx.Err() != nil {
		t.Errorf("%s: %q did not finish within 60 s:\n%s", c.where, c.line, out.String())
		return
	}
	if code != c.exit {
		want := "exit 0"
		if c.exit != 0 {
			want = fmt.Sprintf("exit %d as its comment says", c.exit)
		}
		t.Errorf("%s: %q exited %d, want %s:\n%s", c.where, c.line, code, want, out.String())
		return
	}
	t.Logf("%s: %s: exit %d in %v", c.where, c.line, code, time.Since(start).Round(time.Millisecond))
}

// TestREADMETour runs every command of the README's and examples/' tour
// blocks (the marking rule above) as written, on the real binaries and
// gin-master --dev, so that the first hour works as the README says.
func TestREADMETour(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	type file struct {
		name string
		cmds []tourCmd
	}
	var files []file
	var problems []string
	for _, name := range tourFiles(t) {
		b, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		cmds, p := parseTour(name, string(b))
		problems = append(problems, p...)
		if len(cmds) > 0 {
			files = append(files, file{name, cmds})
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	if len(files) == 0 || files[0].name != "README.md" {
		t.Fatalf("README.md has no tour block (a fenced block right after a %s --> line)", tourMarker)
	}
	if t.Failed() {
		t.FailNow()
	}
	bin := binaries(t)
	dev := makeDevLine(t)
	for _, f := range files {
		t.Run(strings.ReplaceAll(f.name, "/", "_"), func(t *testing.T) {
			cl := startTourDev(t, bin, dev, nil)
			for _, c := range f.cmds {
				if c.words[0] == "./bin/gin-master" {
					cl = startTourDev(t, bin, c, cl)
					continue
				}
				runTourCtl(t, bin, c, cl)
			}
		})
	}
}

// TestExampleNCCLLogIsTheFixture: examples/nccl-logs says its log is the
// parser's fixture; the two copies stay one file.
func TestExampleNCCLLogIsTheFixture(t *testing.T) {
	ex, err := os.ReadFile("../examples/nccl-logs/ib-disabled-by-env.log")
	if err != nil {
		t.Fatal(err)
	}
	fx, err := os.ReadFile("../internal/nccllog/testdata/ib-disabled-by-env.log")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ex, fx) {
		t.Error("examples/nccl-logs/ib-disabled-by-env.log differs from internal/nccllog/testdata/ib-disabled-by-env.log: copy the fixture over it")
	}
}

// TestTourMarkingRule checks the parser of the marking rule on a small
// document: what is run, with which exit, and what breaks the rule.
func TestTourMarkingRule(t *testing.T) {
	doc := "text\n\n```sh\nmake dev\n```\n\n<!-- tour -->\n```sh\n# a comment\n./bin/ginctl nodes   # the nodes\n" +
		"./bin/ginctl check  # exit 1: two fail\n./bin/ginctl watch # Ctrl-C to stop\n./bin/gin-master --dev --dev-nodes 'n[1-2]'  # two\n```\n\n" +
		"```sh\n./bin/ginctl nodes\n```\n\n<!-- not tour: needs root -->\n```sh\n./bin/ginctl gate\n```\n\n" +
		"<!-- tour -->\n```sh\nsudo make fault-test\n./bin/ginctl nodes | head\n./bin/gin-master --node-id m1\n```\n"
	cmds, problems := parseTour("doc.md", doc)
	var got []string
	for _, c := range cmds {
		got = append(got, fmt.Sprintf("%s %q exit=%d interrupt=%v", c.where, c.words, c.exit, c.interrupt))
	}
	want := []string{
		`doc.md:10 ["./bin/ginctl" "nodes"] exit=0 interrupt=false`,
		`doc.md:11 ["./bin/ginctl" "check"] exit=1 interrupt=false`,
		`doc.md:12 ["./bin/ginctl" "watch"] exit=0 interrupt=true`,
		`doc.md:13 ["./bin/gin-master" "--dev" "--dev-nodes" "n[1-2]"] exit=0 interrupt=false`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantProblems := []string{"doc.md:17: \"./bin/ginctl nodes\" is in a block not marked", "doc.md:27: \"sudo make fault-test\"",
		"doc.md:28: \"./bin/ginctl nodes | head\": '|' needs a shell", "doc.md:29: \"./bin/gin-master --node-id m1\": the tour starts gin-master only with --dev"}
	if len(problems) != len(wantProblems) {
		t.Fatalf("problems %q, want %d", problems, len(wantProblems))
	}
	for i, w := range wantProblems {
		if !strings.HasPrefix(problems[i], w) {
			t.Errorf("problem %q, want it to start with %q", problems[i], w)
		}
	}
}
