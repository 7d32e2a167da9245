{{/* The edge namespace: namespace.name, else the release namespace. */}}
{{- define "aether-edge.namespace" -}}
{{- default .Release.Namespace .Values.namespace.name -}}
{{- end -}}

{{/* image: repository:tag of a {repository, tag} map. */}}
{{- define "aether-edge.image" -}}
{{- printf "%s:%s" .repository (toString .tag) -}}
{{- end -}}

{{/* Values the agent would refuse, refused here first. */}}
{{- define "aether-edge.validate" -}}
{{- if not (has .Values.addressMode (list "service" "static")) -}}
{{- fail (printf "addressMode must be service or static, not %q" .Values.addressMode) -}}
{{- end -}}
{{- if not (has .Values.logFormat (list "text" "json")) -}}
{{- fail (printf "logFormat must be text or json, not %q" .Values.logFormat) -}}
{{- end -}}
{{- $ns := include "aether-edge.namespace" . -}}
{{- if and .Values.namespace.create (or (eq $ns "default") (hasPrefix "kube-" $ns)) -}}
{{- fail (printf "namespace.create would make the chart own namespace %q (and helm uninstall delete it): install into the edge namespace (--namespace aether-ingress), or set namespace.create=false" $ns) -}}
{{- end -}}
{{- end -}}

{{/* The labels every object carries: Kubernetes' recommended ones. The
     DaemonSet's selector stays app.kubernetes.io/name alone (it is immutable:
     an upgrade must not change it). */}}
{{- define "aether-edge.labels" -}}
app.kubernetes.io/name: aether-edge
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: aether-edge
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
