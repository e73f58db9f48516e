{{/* The chart's name, overridable. */}}
{{- define "opensandbox.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every object name: "<release>-<chart>", or the release alone when it contains the chart name. */}}
{{- define "opensandbox.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "opensandbox.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "opensandbox.controller.fullname" -}}{{ include "opensandbox.fullname" . }}-controller{{- end -}}
{{- define "opensandbox.server.fullname" -}}{{ include "opensandbox.fullname" . }}-server{{- end -}}

{{/* Labels of every object. */}}
{{- define "opensandbox.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: opensandbox
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* Labels naming one component, beside opensandbox.labels (the argument is a dict: ctx, component). */}}
{{- define "opensandbox.componentLabels" -}}
app.kubernetes.io/name: {{ include "opensandbox.name" .ctx }}-{{ .component }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Selector labels of one component (the argument is a dict: ctx, component). */}}
{{- define "opensandbox.selectorLabels" -}}
{{ include "opensandbox.componentLabels" . }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- end -}}

{{/* "repository:tag" of an image value. */}}
{{- define "opensandbox.image" -}}
{{- printf "%s:%s" .repository (toString .tag) -}}
{{- end -}}

{{/* The namespace sandboxes are created in. */}}
{{- define "opensandbox.sandboxNamespace" -}}
{{- default .Release.Namespace .Values.server.kubernetes.namespace -}}
{{- end -}}

{{/* The Secret holding the server's API key, and its key. */}}
{{- define "opensandbox.server.secretName" -}}
{{- default (printf "%s-api-key" (include "opensandbox.server.fullname" .)) .Values.server.existingSecret -}}
{{- end -}}
{{- define "opensandbox.server.secretKey" -}}
{{- if .Values.server.existingSecret }}{{ .Values.server.existingSecretKey }}{{ else }}api-key{{ end -}}
{{- end -}}
