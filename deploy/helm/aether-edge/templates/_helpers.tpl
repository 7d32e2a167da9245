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
{{ include "aether-edge.commonLabels" . }}
{{- end -}}

{{/* The controller's objects: their own name, so no selector of the edge
     pods' (the DaemonSet's, the record and metrics Services') takes them in. */}}
{{- define "aether-edge.controllerLabels" -}}
app.kubernetes.io/name: aether-edge-controller
{{ include "aether-edge.commonLabels" . }}
{{- end -}}

{{/* Every recommended label but the name. */}}
{{- define "aether-edge.commonLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: aether-edge
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}


{{/* The flags the edge agents and the controller share: whatever changes what
     Envoy gets must be the same on both, or the controller's content hashes
     never match what the agents report (and status never says Programmed). */}}
{{- define "aether-edge.sharedArgs" -}}
            {{- if ne .Values.gatewayClass.controllerName "gateway.aether.io/edge" }}
            - --controller-name={{ .Values.gatewayClass.controllerName }}
            {{- end }}
            {{- if ne .Values.addressMode "service" }}
            - --address-mode={{ .Values.addressMode }}
            {{- end }}
            {{- if ne .Values.logFormat "text" }}
            - --log-format={{ .Values.logFormat }}
            {{- end }}
            {{- if ne .Values.logLevel "info" }}
            - --log-level={{ .Values.logLevel }}
            {{- end }}
            {{- if ne .Values.accessLog "json" }}
            - --access-log={{ .Values.accessLog }}
            {{- end }}
            {{- if .Values.proxyProtocol }}
            - --proxy-protocol
            {{- end }}
            {{- if .Values.allowExternalHostnameBackends }}
            - --allow-external-hostname-backends
            {{- end }}
            {{- with .Values.service.externalTrafficPolicy }}
            - --external-traffic-policy={{ . }}
            {{- end }}
            {{- with .Values.service.loadBalancerClass }}
            - --load-balancer-class={{ . }}
            {{- end }}
            {{- range .Values.agent.extraArgs }}
            - {{ . | quote }}
            {{- end }}
{{- end -}}
