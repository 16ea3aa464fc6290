package memlimit

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    Setting
		wantErr bool
	}{
		{"auto", Setting{auto: true}, false},
		{" AUTO ", Setting{auto: true}, false},
		{"off", Setting{off: true}, false},
		{"0", Setting{off: true}, false},
		{"900MiB", Setting{bytes: 900 << 20}, false},
		{"1.5GiB", Setting{bytes: 3 << 29}, false},
		{"2gib", Setting{bytes: 2 << 30}, false},
		{"1GB", Setting{bytes: 1e9}, false},
		{"536870912", Setting{bytes: 1 << 29}, false},
		{"512 MiB", Setting{bytes: 512 << 20}, false},
		{"1048576B", Setting{}, true}, // below 64 MiB
		{"10MiB", Setting{}, true},
		{"-1GiB", Setting{}, true},
		{"lots", Setting{}, true},
		{"NaN", Setting{}, true},
		{"Inf", Setting{}, true},
		{"1e30TiB", Setting{}, true},
		{"", Setting{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := Parse(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Parse(%q) err = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Fatalf("Parse(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCgroupLimit(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		self  string
		want  int64
		path  string
	}{
		{"v2 own cgroup", map[string]string{"system.slice/gin.service/memory.max": "2147483648\n", "memory.max": "max\n"}, "0::/system.slice/gin.service\n", 2 << 30, "system.slice/gin.service/memory.max"},
		{"v2 own unlimited", map[string]string{"system.slice/gin.service/memory.max": "max\n"}, "0::/system.slice/gin.service\n", 0, "system.slice/gin.service/memory.max"},
		{"v2 container root", map[string]string{"memory.max": "1073741824\n"}, "0::/\n", 1 << 30, "memory.max"},
		{"v1", map[string]string{"memory/memory.limit_in_bytes": "536870912\n"}, "4:memory:/docker/x\n", 512 << 20, "memory/memory.limit_in_bytes"},
		{"v1 unlimited", map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, "", 0, "memory/memory.limit_in_bytes"},
		{"none", map[string]string{}, "", 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, c := range tc.files {
				writeFile(t, filepath.Join(root, p), c)
			}
			got, path, err := CgroupLimit(root, tc.self)
			if err != nil {
				t.Fatal(err)
			}
			wantPath := ""
			if tc.path != "" {
				wantPath = filepath.Join(root, tc.path)
			}
			if got != tc.want || path != wantPath {
				t.Fatalf("CgroupLimit = %d, %q; want %d, %q", got, path, tc.want, wantPath)
			}
		})
	}
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "memory.max"), "lots\n")
	if _, _, err := CgroupLimit(root, ""); err == nil {
		t.Fatal("a memory.max that is not a number: no error")
	}
}

func TestApply(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "memory.max"), "1073741824\n")
	noEnv := func(string) string { return "" }
	tests := []struct {
		name       string
		flag       string
		sys        System
		want       int64
		wantSource string
	}{
		{"flag", "900MiB", System{CgroupRoot: root, Getenv: noEnv}, 900 << 20, "flag"},
		{"off", "off", System{CgroupRoot: root, Getenv: noEnv}, math.MaxInt64, "off"},
		{"auto from cgroup", "auto", System{CgroupRoot: root, Getenv: noEnv}, int64(966367641), "cgroup " + filepath.Join(root, "memory.max")},
		{"auto without cgroup", "auto", System{CgroupRoot: t.TempDir(), Getenv: noEnv}, orig, "none"},
		{"auto keeps GOMEMLIMIT", "auto", System{CgroupRoot: root, Getenv: func(string) string { return "700MiB" }}, orig, "GOMEMLIMIT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(orig)
			s, err := Parse(tc.flag)
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Apply(tc.sys)
			if err != nil {
				t.Fatal(err)
			}
			if res.Bytes != tc.want || res.Source != tc.wantSource {
				t.Fatalf("Apply = %+v, want %d from %q", res, tc.want, tc.wantSource)
			}
			if got := debug.SetMemoryLimit(-1); got != tc.want {
				t.Fatalf("runtime limit = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	for in, want := range map[int64]string{900 << 20: "900MiB", 2 << 30: "2GiB", math.MaxInt64: "none", 966367641: "922MiB"} {
		if got := String(in); got != want {
			t.Errorf("String(%d) = %q, want %q", in, got, want)
		}
	}
}
