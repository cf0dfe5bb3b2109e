package bench

import "github.com/sluicehq/sluice/internal/redistest"

func sluiceRedisContenders(*redistest.Server) []contenderSpec { return nil }
