package podexec

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The parent-death signal belongs to a thread: the one that execs keeps it and leads
// the new process; threads the Go runtime starts afterwards begin with none. Main may
// run on any of them unless an init locks it to the first, so the probe, which reads
// the setting, keeps to the thread it was exec'd on.
func init() {
	if filepath.Base(os.Args[0]) == "probe" {
		runtime.LockOSThread()
	}
}

// The test binary plays two more parts: container-exec (PODEXEC_TEST_ROLE=exec) and,
// copied into a root file system as /bin/probe, the container's program.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "probe" {
		probe()
		os.Exit(0)
	}
	if os.Getenv("PODEXEC_TEST_ROLE") == "exec" {
		err := Main(os.Args[1:])
		fmt.Fprintf(os.Stderr, "container-exec: %v\n", err)
		os.Exit(127)
	}
	os.Exit(m.Run())
}

// probe reports what the container sees, one key=value a line.
func probe() {
	say := func(k string, v any) { fmt.Printf("%s=%v\n", k, v) }
	groups, _ := os.Getgroups()
	say("uid", os.Getuid())
	say("gid", os.Getgid())
	say("groups", groups)
	cwd, _ := os.Getwd()
	say("cwd", cwd)
	_, err := os.Stat("/image-marker")
	say("image-marker", err == nil)
	_, err = os.Stat(os.Getenv("HOST_ONLY"))
	say("host-visible", err == nil)
	say("write-etc", os.WriteFile("/etc/new", []byte("x"), 0o644) == nil)
	say("write-volume", os.WriteFile("/var/run/vol/x", []byte("x"), 0o644) == nil)
	b, _ := os.ReadFile("/etc/hostname")
	say("hostname", strings.TrimSpace(string(b)))
	status, _ := os.ReadFile("/proc/self/status")
	say("nnp", strings.Contains(string(status), "NoNewPrivs:\t1"))
	say("devnull", os.WriteFile("/dev/null", []byte("x"), 0) == nil)
	_, err = os.Stat("/sys/class/net/lo")
	say("sys", err == nil)
	say("env", os.Getenv("AE"))
	var sig int
	_ = unix.Prctl(unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&sig)), 0, 0, 0)
	say("pdeathsig", syscall.Signal(sig))
}

func TestContainerFromRootfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount namespaces, overlayfs, pivot_root); make test runs as root")
	}
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs")
	for _, d := range []string{"bin", "etc", "tmp", "proc", "sys", "dev"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	dst, err := os.OpenFile(filepath.Join(rootfs, "bin/probe"), os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, self); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	for name, body := range map[string]string{"image-marker": "", "etc/passwd": "nonroot:x:65532:65532::/:/sbin/nologin\n"} {
		if err := os.WriteFile(filepath.Join(rootfs, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vol := filepath.Join(dir, "vol")
	hostname := filepath.Join(dir, "hostname")
	if err := os.Mkdir(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(vol, 0o777)
	if err := os.WriteFile(hostname, []byte("pod-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(readOnly bool) map[string]string {
		scratch, err := os.MkdirTemp(dir, "scratch")
		if err != nil {
			t.Fatal(err)
		}
		root := Root{Rootfs: rootfs, Scratch: scratch, ReadOnly: readOnly, NoNewPrivs: true, UID: 65532, GID: 65532, Groups: []uint32{65532, 4242}}
		mounts := []Mount{{Source: vol, Target: "/var/run/vol"}, {Source: hostname, Target: "/etc/hostname", ReadOnly: true}}
		cmd := exec.Command("/proc/self/exe", append(root.Args(), Args("", "/tmp", mounts, []string{"probe"})...)...)
		cmd.Env = []string{"PODEXEC_TEST_ROLE=exec", "PATH=/usr/bin:/bin", "AE=from-env", "HOST_ONLY=" + dir}
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("container-exec: %v\n%s", err, out)
		}
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			k, v, _ := strings.Cut(line, "=")
			got[k] = v
		}
		return got
	}
	want := map[string]string{
		"uid": "65532", "gid": "65532", "groups": "[4242 65532]", "cwd": "/tmp", "image-marker": "true", "host-visible": "false",
		"write-etc": "true", "write-volume": "true", "hostname": "pod-1", "nnp": "true", "devnull": "true", "sys": "true", "env": "from-env",
		"pdeathsig": "killed", // kept across the change to uid 65532
	}
	// uid 65532 may not write /etc of the image (root's, 0755) even when writable:
	// make it the user's in the image to see the overlay take the write.
	if err := os.Chown(filepath.Join(rootfs, "etc"), 65532, 65532); err != nil {
		t.Fatal(err)
	}
	got := run(false)
	t.Logf("writable root: %v", got)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("writable root: %s=%s, want %s (all: %v)", k, got[k], v, got)
		}
	}
	if _, err := os.Stat(filepath.Join(rootfs, "etc/new")); !os.IsNotExist(err) {
		t.Errorf("a write in the container reached the image's root file system")
	}
	if _, err := os.Stat(filepath.Join(vol, "x")); err != nil {
		t.Errorf("a write to the volume did not reach it: %v", err)
	}
	want["write-etc"] = "false"
	got = run(true)
	t.Logf("read-only root: %v", got)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("readOnlyRootFilesystem: %s=%s, want %s (all: %v)", k, got[k], v, got)
		}
	}
}
