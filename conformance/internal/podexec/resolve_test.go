package podexec

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestResolveIn(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	for _, d := range []string{"usr/local/bin", "var/run", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"bin": "usr/local/bin", "up": "../../../..", "abs": "/etc", "var/run/link": "../../etc",
		"loop1": "loop2", "loop2": "loop1", "etc/file-link": "/etc/hosts",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc/hosts"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"/":                      root,
		"/bin/aether-edge":       filepath.Join(root, "usr/local/bin/aether-edge"),
		"/up/etc":                filepath.Join(root, "etc"),
		"/up/../../x":            filepath.Join(root, "x"),
		"/abs/resolv.conf":       filepath.Join(root, "etc/resolv.conf"),
		"/var/run/link/hosts":    filepath.Join(root, "etc/hosts"),
		"/etc/file-link":         filepath.Join(root, "etc/hosts"),
		"relative/../etc/./conf": filepath.Join(root, "etc/conf"),
		"/missing/a/b":           filepath.Join(root, "missing/a/b"),
	}
	for in, want := range cases {
		got, err := ResolveIn(root, in, false)
		if err != nil || got != want {
			t.Errorf("ResolveIn(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ResolveIn(root, "/loop1/x", false); err == nil {
		t.Errorf("a symlink loop resolved")
	}
	if _, err := ResolveIn(root, "/etc/hosts/x", false); err == nil {
		t.Errorf("a path through a file resolved")
	}
	// mkdir: the missing parents are made inside root, the last component is not.
	got, err := ResolveIn(root, "/up/var/run/aether-edge/ads.sock", true)
	if err != nil || got != filepath.Join(root, "var/run/aether-edge/ads.sock") {
		t.Fatalf("mkdir: %q %v", got, err)
	}
	if st, err := os.Stat(filepath.Join(root, "var/run/aether-edge")); err != nil || !st.IsDir() {
		t.Errorf("parent not made: %v", err)
	}
	if _, err := os.Lstat(got); !os.IsNotExist(err) {
		t.Errorf("last component made: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(root)); len(entries) != 1 {
		t.Errorf("something was made beside root: %v", entries)
	}
}

func TestRootArgsRoundTrip(t *testing.T) {
	r := Root{Rootfs: "/s/images/abc/rootfs", Scratch: "/s/pods/u/containers/agent", ReadOnly: true, NoNewPrivs: true, UID: 65532, GID: 65532, Groups: []uint32{65532, 7}}
	want := []string{"--rootfs", "/s/images/abc/rootfs", "--scratch", "/s/pods/u/containers/agent", "--uid", "65532", "--gid", "65532",
		"--groups", "65532,7", "--readonly-root", "--no-new-privs"}
	if got := r.Args(); !reflect.DeepEqual(got, want) {
		t.Errorf("Args() = %q\nwant %q", got, want)
	}
	gs, err := parseGroups("65532,7")
	if err != nil || !reflect.DeepEqual(gs, []uint32{65532, 7}) {
		t.Errorf("parseGroups: %v %v", gs, err)
	}
	if _, err := parseGroups("x"); err == nil {
		t.Errorf("parseGroups(x) accepted")
	}
}
