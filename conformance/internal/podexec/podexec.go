// Package podexec is the last step of starting a container process: it runs in a
// fresh mount namespace (the node agent starts it with CLONE_NEWNS, which also makes
// every mount private), bind-mounts the pod's materialized volumes at their mount
// paths, enters the pod's network namespace and execs the program.
//
//	node agent ──exec(CLONE_NEWNS)──► nodeagent container-exec --mount SRC:DST … -- argv
//	                                   bind mounts → setns(net) → chdir → execve(argv)
//
// The mount targets already exist: the node agent creates missing ones beforehand
// and records them, so teardown can remove exactly those.
package podexec

import (
	"flag"
	"fmt"
	"os"
	"runtime"
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return fmt.Errorf("container-exec: no program")
	}
	for _, m := range mounts {
		if err := unix.Mount(m.Source, m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind mount %s on %s: %w", m.Source, m.Target, err)
		}
		if m.ReadOnly {
			if err := unix.Mount("", m.Target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
				return fmt.Errorf("remount %s read-only: %w", m.Target, err)
			}
		}
	}
	runtime.LockOSThread()
	if *netns != "" {
		fd, err := unix.Open(*netns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open netns: %w", err)
		}
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("setns %s: %w", *netns, err)
		}
		unix.Close(fd)
	}
	if *workdir != "" {
		if err := os.Chdir(*workdir); err != nil {
			return fmt.Errorf("chdir %s: %w", *workdir, err)
		}
	}
	return syscall.Exec(argv[0], argv, os.Environ())
}
