package tracing

import (
	"strings"
	"testing"
)

func TestEnabled(t *testing.T) {
	tests := []struct {
		env     map[string]string
		want    bool
		wantErr string
	}{
		{env: nil, want: false},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, want: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, want: false},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, want: false},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: "otlp only"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, wantErr: "grpc only"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, want: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, want: false}, // not asked for
	}
	for _, tt := range tests {
		got, err := Enabled(func(k string) string { return tt.env[k] })
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("Enabled(%v): error %v, want one saying %q", tt.env, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("Enabled(%v) = %v, %v; want %v", tt.env, got, err, tt.want)
		}
	}
}

func TestErrorClassHidesText(t *testing.T) {
	err := errorClassOf("redisstore: check \"user:secret\": dial tcp 10.0.0.1:6379: connection refused")
	if err != "unavailable" {
		t.Errorf("errorClass = %q, want unavailable", err)
	}
}

func errorClassOf(msg string) string { return errorClass(errString(msg)) }

type errString string

func (e errString) Error() string { return string(e) }

func TestSamplingFromEnv(t *testing.T) {
	tests := []struct {
		sampler, arg string
		root         float64
		wantErr      bool
	}{
		{"", "", 1, false},
		{"parentbased_always_on", "", 1, false},
		{"parentbased_always_off", "", 0, false},
		{"always_off", "", 0, false},
		{"always_on", "", 1, false},
		{"parentbased_traceidratio", "0.01", 0.01, false},
		{"traceidratio", "0.25", 0.25, false},
		{"traceidratio", "", 1, false},
		{"traceidratio", "1.5", 0, true},
		{"traceidratio", "x", 0, true},
		{"jaeger_remote", "", 0, true},
	}
	for _, tt := range tests {
		env := map[string]string{"OTEL_TRACES_SAMPLER": tt.sampler, "OTEL_TRACES_SAMPLER_ARG": tt.arg}
		s, err := samplingFromEnv(func(k string) string { return env[k] })
		if (err != nil) != tt.wantErr || err == nil && s.root != tt.root {
			t.Errorf("%s=%q: root %v, error %v; want root %v, error %v", tt.sampler, tt.arg, s.root, err, tt.root, tt.wantErr)
		}
	}
}
