package graph

import "strconv"

// naturalLess orders names the way nvidia-smi numbers NICs: "mlx5_2" before
// "mlx5_10".
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitsPrefix(a), digitsPrefix(b)
		if da > 0 && db > 0 {
			na, errA := strconv.ParseUint(a[:da], 10, 64)
			nb, errB := strconv.ParseUint(b[:db], 10, 64)
			if errA == nil && errB == nil && na != nb {
				return na < nb
			}
			if a[:da] != b[:db] {
				return a[:da] < b[:db]
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitsPrefix(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
