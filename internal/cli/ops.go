package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Helpers of the operating commands (worker pool, workers, schedule,
// scheduler, models).

// redisClient connects to the configured Redis server, which the cluster
// commands need.
func (a *app) redisClient(ctx context.Context) (*redis.Client, error) {
	if a.cfg.Redis.Addr == "" {
		return nil, errors.New("no Redis server configured (--redis HOST:PORT or NERFLOW_REDIS_ADDR)")
	}
	rdb := redis.NewClient(&redis.Options{Addr: a.cfg.Redis.Addr, Password: a.cfg.Redis.Password, DB: a.cfg.Redis.DB})
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis %s: %w", a.cfg.Redis.Addr, err)
	}
	return rdb, nil
}
