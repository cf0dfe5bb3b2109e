{{/* The chart's name. */}}
{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name of the release's objects, at most 57 characters so that "-admin" still fits. */}}
{{- define "sluice.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 57 | trimSuffix "-" }}
{{- else if contains (include "sluice.name" .) .Release.Name }}
{{- .Release.Name | trunc 57 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "sluice.name" .) | trunc 57 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "sluice.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "sluice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sluice.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding admin-token and store-url. */}}
{{- define "sluice.secretName" -}}
{{- default (include "sluice.fullname" .) .Values.existingSecret }}
{{- end }}

{{/* The store URL with store.password as its userinfo. */}}
{{- define "sluice.storeURL" -}}
{{- $url := .Values.store.url }}
{{- if and .Values.store.password (contains "://" $url) }}
{{- $parts := splitn "://" 2 $url }}
{{- printf "%s://:%s@%s" $parts._0 (urlquery .Values.store.password) $parts._1 }}
{{- else }}
{{- $url }}
{{- end }}
{{- end }}

{{/* sluice.yaml: the config value with the listeners, rls and admin sections the chart owns. */}}
{{- define "sluice.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) }}
{{- $listeners := list (dict "addr" (printf "0.0.0.0:%d" (int .Values.ports.http)) "serve" "api") }}
{{- if .Values.admin.enabled }}
{{- $listeners = append $listeners (dict "addr" (printf "0.0.0.0:%d" (int .Values.ports.admin)) "serve" "admin") }}
{{- end }}
{{- if .Values.rls.enabled }}
{{- $listeners = append $listeners (dict "addr" (printf "0.0.0.0:%d" (int .Values.ports.grpc)) "serve" "grpc") }}
{{- $_ := set $cfg "rls" (dict "config_dir" "/etc/sluice/rls" "response_headers" .Values.rls.responseHeaders "shadow_mode" .Values.rls.shadowMode) }}
{{- end }}
{{- $_ := set $cfg "listeners" $listeners }}
{{- $admin := deepCopy (get $cfg "admin" | default dict) }}
{{- $_ := set $admin "endpoints" .Values.admin.endpoints }}
{{- $_ := set $cfg "admin" $admin }}
{{- toYaml $cfg }}
{{- end }}
