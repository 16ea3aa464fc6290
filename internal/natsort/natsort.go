// Package natsort orders names the way people and nvidia-smi number them:
// digit runs compare by value, so node2 comes before node10 and mlx5_2
// before mlx5_10. Node lists, NIC numbering, Slurm exports and host
// ordering all use it, so they agree.
package natsort

// Compare orders names with their digit runs compared as numbers:
// "node2" before "node10", "node002" after "node2" (the shorter spelling of
// the same number first), otherwise bytewise.
func Compare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitsPrefix(a), digitsPrefix(b)
		if da > 0 && db > 0 {
			if c := compareDigits(a[:da], b[:db]); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			if a[0] < b[0] {
				return -1
			}
			return 1
		}
		a, b = a[1:], b[1:]
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}

// compareDigits compares two runs of decimal digits by value (any length),
// then by spelling (fewer leading zeros first).
func compareDigits(a, b string) int {
	ta, tb := trimZeros(a), trimZeros(b)
	switch {
	case len(ta) != len(tb):
		if len(ta) < len(tb) {
			return -1
		}
		return 1
	case ta != tb:
		if ta < tb {
			return -1
		}
		return 1
	case len(a) != len(b):
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return 0
}

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}

func digitsPrefix(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// Less reports whether a orders before b.
func Less(a, b string) bool { return Compare(a, b) < 0 }
