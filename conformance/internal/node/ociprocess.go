package node

// How a container runs from an image, with Kubernetes' precedence (pure functions;
// the file system of the image is only read through userDB):
//
//	argv     command → replaces the image's Entrypoint (and drops its Cmd)
//	         args    → replace the image's Cmd
//	env      the image's Env, then what the kubelet adds, then envFrom and env
//	user     container securityContext > pod securityContext > the image's User
//	         (runAsUser without runAsGroup: the group of that uid in the image's
//	         /etc/passwd, else 0); supplementary groups: the primary group, the
//	         user's groups in /etc/group, fsGroup, supplementalGroups
//	workdir  the container's workingDir > the image's WorkingDir > /

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// imageArgv is the process a container starts from an image.
func imageArgv(cfg ImageConfig, command, args []string) ([]string, error) {
	var argv []string
	switch {
	case len(command) > 0:
		argv = append(slices.Clone(command), args...)
	case len(args) > 0:
		argv = append(slices.Clone(cfg.Entrypoint), args...)
	default:
		argv = append(slices.Clone(cfg.Entrypoint), cfg.Cmd...)
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("no command: the image has no Entrypoint or Cmd and the container sets no command")
	}
	return argv, nil
}

// imageEnv parses the image's KEY=VALUE list (a KEY without "=" is set empty).
func imageEnv(cfg ImageConfig) []envVar {
	var out []envVar
	for _, kv := range cfg.Env {
		k, v, _ := strings.Cut(kv, "=")
		if k != "" {
			out = append(out, envVar{k, v})
		}
	}
	return out
}

func imageWorkdir(cfg ImageConfig, c corev1.Container) string {
	switch {
	case c.WorkingDir != "":
		return c.WorkingDir
	case cfg.WorkingDir != "":
		return cfg.WorkingDir
	}
	return "/"
}

// userDB is an image's /etc/passwd and /etc/group (either may be empty).
type userDB struct{ passwd, group string }

type passwdEntry struct {
	name     string
	uid, gid uint32
	home     string
}

func (db userDB) users() []passwdEntry {
	var out []passwdEntry
	for _, line := range strings.Split(db.passwd, "\n") {
		f := strings.Split(line, ":")
		if len(f) < 7 {
			continue
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, passwdEntry{f[0], uint32(uid), uint32(gid), f[5]})
	}
	return out
}

func (db userDB) userByName(name string) (passwdEntry, bool) {
	for _, u := range db.users() {
		if u.name == name {
			return u, true
		}
	}
	return passwdEntry{}, false
}

func (db userDB) userByID(uid uint32) (passwdEntry, bool) {
	for _, u := range db.users() {
		if u.uid == uid {
			return u, true
		}
	}
	return passwdEntry{}, false
}

// groupID resolves a group name or number; memberOf lists the groups naming user.
func (db userDB) groupID(name string) (uint32, bool) {
	if n, err := strconv.ParseUint(name, 10, 32); err == nil {
		return uint32(n), true
	}
	for _, line := range strings.Split(db.group, "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 3 && f[0] == name {
			if n, err := strconv.ParseUint(f[2], 10, 32); err == nil {
				return uint32(n), true
			}
		}
	}
	return 0, false
}

func (db userDB) memberOf(user string) []uint32 {
	var out []uint32
	for _, line := range strings.Split(db.group, "\n") {
		f := strings.Split(line, ":")
		if len(f) < 4 || user == "" {
			continue
		}
		if slices.Contains(strings.Split(f[3], ","), user) {
			if n, err := strconv.ParseUint(f[2], 10, 32); err == nil {
				out = append(out, uint32(n))
			}
		}
	}
	return out
}

// processUser is who a container's process runs as.
type processUser struct {
	UID, GID uint32
	Groups   []uint32 // supplementary, sorted, without duplicates
	Home     string   // for HOME when neither image nor container sets it
}

// imageUser resolves the container's user: securityContext over the image's User.
func imageUser(cfgUser string, pod *corev1.PodSecurityContext, c *corev1.SecurityContext, db userDB) (processUser, error) {
	var runAsUser, runAsGroup *int64
	var nonRoot *bool
	var fsGroup *int64
	var supplemental []int64
	if pod != nil {
		runAsUser, runAsGroup, nonRoot, fsGroup, supplemental = pod.RunAsUser, pod.RunAsGroup, pod.RunAsNonRoot, pod.FSGroup, pod.SupplementalGroups
	}
	if c != nil {
		if c.RunAsUser != nil {
			runAsUser = c.RunAsUser
		}
		if c.RunAsGroup != nil {
			runAsGroup = c.RunAsGroup
		}
		if c.RunAsNonRoot != nil {
			nonRoot = c.RunAsNonRoot
		}
	}
	var u processUser
	name := ""
	gidKnown := false
	if runAsUser != nil {
		u.UID = uint32(*runAsUser)
	} else {
		userPart, groupPart, hasGroup := strings.Cut(cfgUser, ":")
		switch n, err := strconv.ParseUint(userPart, 10, 32); {
		case userPart == "":
		case err == nil:
			u.UID = uint32(n)
		default:
			e, ok := db.userByName(userPart)
			if !ok {
				return u, fmt.Errorf("image user %q: no such user in the image's /etc/passwd", userPart)
			}
			if nonRoot != nil && *nonRoot {
				return u, fmt.Errorf("image has non-numeric user (%s), cannot verify user is non-root (runAsNonRoot)", userPart)
			}
			u.UID, u.GID, name, gidKnown = e.uid, e.gid, e.name, true
		}
		if hasGroup {
			g, ok := db.groupID(groupPart)
			if !ok {
				return u, fmt.Errorf("image group %q: no such group in the image's /etc/group", groupPart)
			}
			u.GID, gidKnown = g, true
		}
	}
	e, found := db.userByID(u.UID)
	if found {
		if name == "" {
			name = e.name
		}
		u.Home = e.home
	}
	switch {
	case runAsGroup != nil:
		u.GID = uint32(*runAsGroup)
	case gidKnown && runAsUser == nil:
	case found:
		u.GID = e.gid
	default:
		u.GID = 0
	}
	if u.Home == "" {
		u.Home = "/"
	}
	if nonRoot != nil && *nonRoot && u.UID == 0 {
		return u, fmt.Errorf("container has runAsNonRoot and image will run as root")
	}
	groups := append([]uint32{u.GID}, db.memberOf(name)...)
	if fsGroup != nil {
		groups = append(groups, uint32(*fsGroup))
	}
	for _, g := range supplemental {
		groups = append(groups, uint32(g))
	}
	slices.Sort(groups)
	u.Groups = slices.Compact(groups)
	return u, nil
}
