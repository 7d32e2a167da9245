package node

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

type envVar struct{ name, value string }

func lookupEnv(env []envVar, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if env[i].name == name {
			return env[i].value, true
		}
	}
	return "", false
}

func envList(env []envVar) []string {
	seen := map[string]bool{}
	var out []string
	for i := len(env) - 1; i >= 0; i-- {
		if seen[env[i].name] {
			continue
		}
		seen[env[i].name] = true
		out = append(out, env[i].name+"="+env[i].value)
	}
	return out
}

// programEnv is the base environment of a container run as a host program: the
// programs' bin directory first on PATH (images.go), HOME /root.
func programEnv(binDir string) []envVar {
	return []envVar{
		{"PATH", binDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		{"HOME", "/root"},
	}
}

// containerEnv builds a container's environment as the kubelet would: the base (the
// image's Env, or programEnv), HOSTNAME and the API server's KUBERNETES_SERVICE_*
// variables, envFrom, then env (with fieldRef, secretKeyRef, configMapKeyRef and
// $(VAR) expansion).
func containerEnv(pod *corev1.Pod, c corev1.Container, base []envVar, apiHost, apiPort string, cs kubernetes.Interface, ctx context.Context) ([]envVar, error) {
	env := append(append([]envVar{}, base...), []envVar{
		{"HOSTNAME", pod.Name},
		{"KUBERNETES_SERVICE_HOST", apiHost},
		{"KUBERNETES_SERVICE_PORT", apiPort},
		{"KUBERNETES_SERVICE_PORT_HTTPS", apiPort},
	}...)
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, err := cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				if from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
					continue
				}
				return nil, err
			}
			for k, v := range cm.Data {
				env = append(env, envVar{from.Prefix + k, v})
			}
		case from.SecretRef != nil:
			s, err := cs.CoreV1().Secrets(pod.Namespace).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				if from.SecretRef.Optional != nil && *from.SecretRef.Optional {
					continue
				}
				return nil, err
			}
			for k, v := range s.Data {
				env = append(env, envVar{from.Prefix + k, string(v)})
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env = append(env, envVar{e.Name, expand(e.Value, env)})
			continue
		}
		var val string
		switch src := e.ValueFrom; {
		case src.FieldRef != nil:
			v, err := fieldValue(pod, src.FieldRef.FieldPath)
			if err != nil {
				return nil, err
			}
			val = v
		case src.SecretKeyRef != nil:
			s, err := cs.CoreV1().Secrets(pod.Namespace).Get(ctx, src.SecretKeyRef.Name, metav1.GetOptions{})
			if err != nil {
				if src.SecretKeyRef.Optional != nil && *src.SecretKeyRef.Optional {
					continue
				}
				return nil, err
			}
			val = string(s.Data[src.SecretKeyRef.Key])
		case src.ConfigMapKeyRef != nil:
			cm, err := cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, src.ConfigMapKeyRef.Name, metav1.GetOptions{})
			if err != nil {
				if src.ConfigMapKeyRef.Optional != nil && *src.ConfigMapKeyRef.Optional {
					continue
				}
				return nil, err
			}
			val = cm.Data[src.ConfigMapKeyRef.Key]
		case src.ResourceFieldRef != nil:
			val = "0"
		default:
			return nil, fmt.Errorf("env %q: unsupported valueFrom", e.Name)
		}
		env = append(env, envVar{e.Name, val})
	}
	return env, nil
}

func expandAll(in []string, env []envVar) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expand(s, env)
	}
	return out
}

// expand resolves $(VAR) references as the kubelet does; $$ escapes a dollar sign,
// unknown references are left as they are.
func expand(s string, env []envVar) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '$' && i+1 < len(s) {
			if s[i+1] == '$' {
				b.WriteByte('$')
				i++
				continue
			}
			if s[i+1] == '(' {
				if end := strings.IndexByte(s[i:], ')'); end > 0 {
					name := s[i+2 : i+end]
					if v, ok := lookupEnv(env, name); ok {
						b.WriteString(v)
						i += end
						continue
					}
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
