module github.com/sluicehq/sluice

go 1.26.0

require (
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/redis/rueidis v1.0.79 // indirect
	golang.org/x/sys v0.48.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
