// Package podexec is the last step of starting a container process: it runs in a
// fresh mount namespace (the node agent starts it with CLONE_NEWNS, which also makes
// every mount private), bind-mounts the pod's materialized volumes at their mount
// paths, enters the pod's network namespace and execs the program.
//
//	node agent ──exec(CLONE_NEWNS)──► nodeagent container-exec --mount SRC:DST … -- argv
//	                                   bind mounts → setns(net) → chdir → execve(argv)
//
// A container run from an OCI image (--rootfs) gets its own root file system instead,
// with the volumes mounted inside it, and runs as the image's user: see root.go.
//
// A mount target that does not exist is made inside the private mount namespace only:
// its nearest existing ancestor directory (say /etc for /etc/envoy) is covered by a
// tmpfs that mirrors it — each original entry bind-mounted back, symlinks copied — and
// the target is created there. The host file system is never written. Only a missing
// top-level directory (ancestor "/") is created on the host, by the node agent, which
// records it for teardown.
package podexec

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Mount is one bind mount of a materialized volume into the container's view.
type Mount struct {
	Source, Target string
	ReadOnly       bool
}

// Args renders the container-exec command line (after the subcommand name).
func Args(netns, workdir string, mounts []Mount, argv []string) []string {
	out := []string{}
	if netns != "" {
		out = append(out, "--netns", netns)
	}
	if workdir != "" {
		out = append(out, "--workdir", workdir)
	}
	for _, m := range mounts {
		spec := m.Source + ":" + m.Target
		if m.ReadOnly {
			spec += ":ro"
		}
		out = append(out, "--mount", spec)
	}
	out = append(out, "--")
	return append(out, argv...)
}

type mountFlags []Mount

func (m *mountFlags) String() string { return fmt.Sprint(*m) }
func (m *mountFlags) Set(v string) error {
	parts := strings.Split(v, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return fmt.Errorf("mount %q: want SRC:DST[:ro]", v)
	}
	*m = append(*m, Mount{Source: parts[0], Target: parts[1], ReadOnly: len(parts) == 3 && parts[2] == "ro"})
	return nil
}

// Main is the container-exec subcommand. It only returns on error.
func Main(args []string) error {
	fs := flag.NewFlagSet("container-exec", flag.ContinueOnError)
	netns := fs.String("netns", "", "network namespace file to enter (empty: stay in the current one)")
	workdir := fs.String("workdir", "", "working directory")
	var mounts mountFlags
	fs.Var(&mounts, "mount", "SRC:DST[:ro] bind mount (repeatable)")
	var root Root
	fs.StringVar(&root.Rootfs, "rootfs", "", "run from this image root file system (see root.go); mount targets are inside it")
	fs.StringVar(&root.Scratch, "scratch", "", "with --rootfs: empty directory for the container's writable layer")
	uid := fs.Uint("uid", 0, "with --rootfs: user id")
	gid := fs.Uint("gid", 0, "with --rootfs: group id")
	groups := fs.String("groups", "", "with --rootfs: supplementary group ids, comma-separated")
	fs.BoolVar(&root.ReadOnly, "readonly-root", false, "with --rootfs: mount the root read-only")
	fs.BoolVar(&root.NoNewPrivs, "no-new-privs", false, "with --rootfs: set no_new_privs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return fmt.Errorf("container-exec: no program")
	}
	// Namespaces and no_new_privs belong to a thread: everything below, up to execve,
	// runs on this one.
	runtime.LockOSThread()
	if root.Rootfs != "" {
		root.UID, root.GID = uint32(*uid), uint32(*gid)
		gs, err := parseGroups(*groups)
		if err != nil {
			return err
		}
		root.Groups = gs
		return execInRoot(root, *netns, *workdir, mounts, argv)
	}
	// Open the program before mounting: a volume may cover its directory (the suite's
	// coredns mounts a ConfigMap at /root, where a build cache may live).
	prog := argv[0]
	if !strings.Contains(prog, "/") {
		p, err := exec.LookPath(prog)
		if err != nil {
			return err
		}
		prog = p
	}
	prog, err := filepath.Abs(prog)
	if err != nil {
		return err
	}
	progFile, err := os.Open(prog)
	if err != nil {
		return err
	}
	progStat, err := progFile.Stat()
	if err != nil {
		return err
	}
	// Its own /dev/shm, as a container runtime gives each pod: Envoy's hot-restart
	// shared memory (base id 0 by default) must not meet another Envoy's on the host.
	if err := unix.Mount("shm", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return fmt.Errorf("private /dev/shm: %w", err)
	}
	// Parents before children, so a nested mount lands inside its parent volume.
	sort.SliceStable(mounts, func(i, j int) bool {
		return strings.Count(filepath.Clean(mounts[i].Target), "/") < strings.Count(filepath.Clean(mounts[j].Target), "/")
	})
	for _, m := range mounts {
		st, err := os.Stat(m.Source)
		if err != nil {
			return fmt.Errorf("mount source: %w", err)
		}
		if err := ensureTarget(m.Target, st.IsDir()); err != nil {
			return fmt.Errorf("mount target %s: %w", m.Target, err)
		}
		if err := unix.Mount(m.Source, m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind mount %s on %s: %w", m.Source, m.Target, err)
		}
		if m.ReadOnly {
			if err := unix.Mount("", m.Target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
				return fmt.Errorf("remount %s read-only: %w", m.Target, err)
			}
		}
	}
	if err := enterNetns(*netns); err != nil {
		return err
	}
	if *workdir != "" {
		if err := os.Chdir(*workdir); err != nil {
			return fmt.Errorf("chdir %s: %w", *workdir, err)
		}
	}
	// By path if it still names the same file (scripts need a path), else through the
	// descriptor opened before the mounts.
	if st, err := os.Stat(prog); err != nil || !os.SameFile(st, progStat) {
		prog = fmt.Sprintf("/proc/self/fd/%d", progFile.Fd())
	}
	err = syscall.Exec(prog, argv, os.Environ())
	runtime.KeepAlive(progFile)
	return err
}

// execInRoot runs argv from an image: the pod's network namespace first (the sysfs
// mounted in the new root shows it), then the root file system (root.go), the working
// directory, the program looked up on the container's PATH inside the image, the
// user, execve.
func execInRoot(root Root, netns, workdir string, mounts []Mount, argv []string) error {
	if err := enterNetns(netns); err != nil {
		return err
	}
	if err := enterRoot(root, mounts); err != nil {
		return err
	}
	if workdir == "" {
		workdir = "/"
	}
	if err := os.Chdir(workdir); err != nil {
		return fmt.Errorf("chdir %s: %w", workdir, err)
	}
	prog := argv[0]
	if !strings.Contains(prog, "/") {
		p, err := exec.LookPath(prog)
		if err != nil {
			return fmt.Errorf("%s: not found on PATH %s in the image", prog, os.Getenv("PATH"))
		}
		prog = p
	}
	if err := becomeUser(root); err != nil {
		return err
	}
	return syscall.Exec(prog, argv, os.Environ())
}

func enterNetns(netns string) error {
	if netns == "" {
		return nil
	}
	fd, err := unix.Open(netns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open netns: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns %s: %w", netns, err)
	}
	return nil
}

// ensureTarget makes target exist in this (private) mount namespace; see the package doc.
func ensureTarget(target string, dir bool) error {
	if _, err := os.Lstat(target); err == nil {
		return nil
	}
	anc := filepath.Dir(filepath.Clean(target))
	for {
		if _, err := os.Stat(anc); err == nil {
			break
		}
		anc = filepath.Dir(anc)
	}
	real, err := filepath.EvalSymlinks(anc)
	if err != nil {
		return err
	}
	if real == "/" || real == "/proc" || real == "/sys" || real == "/dev" {
		return fmt.Errorf("nearest existing directory is %s; cannot make %s privately", real, target)
	}
	if err := mirror(real); err != nil {
		return fmt.Errorf("mirror %s: %w", real, err)
	}
	if dir {
		return os.MkdirAll(target, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	return os.WriteFile(target, nil, 0o644)
}

// mirror covers dir with a writable tmpfs showing the same entries (bind mounts of the
// originals, reached through a descriptor opened before the tmpfs hid them).
func mirror(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("mode=%o", st.Mode().Perm())); err != nil {
		return err
	}
	for _, e := range entries {
		src := fmt.Sprintf("/proc/self/fd/%d/%s", fd, e.Name())
		dst := filepath.Join(dir, e.Name())
		switch {
		case e.Type()&os.ModeSymlink != 0:
			link, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, dst); err != nil {
				return err
			}
			continue
		case e.IsDir():
			if err := os.Mkdir(dst, 0o755); err != nil {
				return err
			}
		default:
			if err := os.WriteFile(dst, nil, 0o644); err != nil {
				return err
			}
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s back: %w", e.Name(), err)
		}
	}
	return nil
}
