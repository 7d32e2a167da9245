package node

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Volumes are materialized once, when the pod starts, as plain files and directories
// under the pod's directory (<state>/pods/<uid>/volumes/<name>); containers see them at
// their mount paths through bind mounts in a private mount namespace (see podexec).
//
// Supported: secret, configMap, emptyDir, downwardAPI, projected (serviceAccountToken,
// secret, configMap, downwardAPI: the API server's kube-api-access volume), hostPath.
// emptyDir is mode 0777; with the pod's fsGroup, all but hostPath belong to that group.
// Later changes to Secrets and ConfigMaps are not propagated.

type volumeSource struct {
	cs  kubernetes.Interface
	pod *corev1.Pod
}

func (v volumeSource) materialize(ctx context.Context, dir string) (map[string]string, error) {
	paths := map[string]string{}
	for _, vol := range v.pod.Spec.Volumes {
		if vol.HostPath != nil {
			paths[vol.Name] = vol.HostPath.Path
			continue
		}
		d := filepath.Join(dir, vol.Name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		paths[vol.Name] = d
		var err error
		switch {
		case vol.EmptyDir != nil:
			// World-writable, as the kubelet makes it: a container running as a
			// non-root user writes there (the aether-edge agent's ADS socket).
			err = os.Chmod(d, 0o777)
		case vol.Secret != nil:
			err = v.secret(ctx, d, vol.Secret.SecretName, vol.Secret.Items, vol.Secret.Optional)
		case vol.ConfigMap != nil:
			err = v.configMap(ctx, d, vol.ConfigMap.Name, vol.ConfigMap.Items, vol.ConfigMap.Optional)
		case vol.DownwardAPI != nil:
			err = v.downward(d, vol.DownwardAPI.Items)
		case vol.Projected != nil:
			for _, src := range vol.Projected.Sources {
				switch {
				case src.Secret != nil:
					err = v.secret(ctx, d, src.Secret.Name, src.Secret.Items, src.Secret.Optional)
				case src.ConfigMap != nil:
					err = v.configMap(ctx, d, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional)
				case src.DownwardAPI != nil:
					err = v.downward(d, src.DownwardAPI.Items)
				case src.ServiceAccountToken != nil:
					err = v.token(ctx, d, src.ServiceAccountToken)
				}
				if err != nil {
					break
				}
			}
		default:
			err = fmt.Errorf("volume %q: unsupported volume type on this node", vol.Name)
		}
		if err == nil {
			err = applyFSGroup(d, v.pod.Spec.SecurityContext)
		}
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", vol.Name, err)
		}
	}
	return paths, nil
}

// applyFSGroup gives a volume to the pod's fsGroup as the kubelet does: every file and
// directory group-owned by it, directories set-group-ID so new files inherit it.
func applyFSGroup(dir string, sc *corev1.PodSecurityContext) error {
	if sc == nil || sc.FSGroup == nil {
		return nil
	}
	gid := int(*sc.FSGroup)
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, gid); err != nil {
			return err
		}
		if d.IsDir() {
			st, err := os.Stat(p)
			if err != nil {
				return err
			}
			return os.Chmod(p, st.Mode().Perm()|os.ModeSetgid)
		}
		return nil
	})
}

func writeFile(dir, rel string, data []byte) error {
	p := filepath.Join(dir, filepath.Clean("/"+rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

func writeKeys(dir string, data map[string][]byte, items []corev1.KeyToPath) error {
	if len(items) == 0 {
		for k, b := range data {
			if err := writeFile(dir, k, b); err != nil {
				return err
			}
		}
		return nil
	}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("key %q not found", it.Key)
		}
		if err := writeFile(dir, it.Path, b); err != nil {
			return err
		}
	}
	return nil
}

func (v volumeSource) secret(ctx context.Context, dir, name string, items []corev1.KeyToPath, optional *bool) error {
	s, err := v.cs.CoreV1().Secrets(v.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if optional != nil && *optional {
			return nil
		}
		return err
	}
	data := map[string][]byte{}
	for k, b := range s.Data {
		data[k] = b
	}
	for k, s := range s.StringData {
		data[k] = []byte(s)
	}
	return writeKeys(dir, data, items)
}

func (v volumeSource) configMap(ctx context.Context, dir, name string, items []corev1.KeyToPath, optional *bool) error {
	cm, err := v.cs.CoreV1().ConfigMaps(v.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if optional != nil && *optional {
			return nil
		}
		return err
	}
	data := map[string][]byte{}
	for k, s := range cm.Data {
		data[k] = []byte(s)
	}
	for k, b := range cm.BinaryData {
		data[k] = b
	}
	return writeKeys(dir, data, items)
}

func (v volumeSource) downward(dir string, items []corev1.DownwardAPIVolumeFile) error {
	for _, it := range items {
		if it.FieldRef == nil {
			continue
		}
		val, err := fieldValue(v.pod, it.FieldRef.FieldPath)
		if err != nil {
			return err
		}
		if err := writeFile(dir, it.Path, []byte(val)); err != nil {
			return err
		}
	}
	return nil
}

func (v volumeSource) token(ctx context.Context, dir string, src *corev1.ServiceAccountTokenProjection) error {
	sa := v.pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		ExpirationSeconds: src.ExpirationSeconds,
		BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: v.pod.Name, UID: v.pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	tr, err := v.cs.CoreV1().ServiceAccounts(v.pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	return writeFile(dir, src.Path, []byte(tr.Status.Token))
}

// fieldValue resolves the fieldRef paths the kubelet supports for env and downwardAPI.
func fieldValue(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	}
	if strings.HasPrefix(path, "metadata.labels['") || strings.HasPrefix(path, "metadata.annotations['") {
		key := path[strings.Index(path, "['")+2 : len(path)-2]
		if strings.HasPrefix(path, "metadata.labels") {
			return pod.Labels[key], nil
		}
		return pod.Annotations[key], nil
	}
	return "", fmt.Errorf("fieldRef %q not supported on this node", path)
}
