package storage

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Opener opens a store from its URL; rawURL is the whole URL, scheme
// included, so each driver parses it its own way.
type Opener func(ctx context.Context, rawURL string) (Store, error)

var (
	driversMu sync.RWMutex
	drivers   = map[string]Opener{}
)

// Register makes a driver available under a URL scheme. Drivers call it from
// init; registering a scheme twice or a nil opener panics, as in
// database/sql, because both are programming errors.
func Register(scheme string, open Opener) {
	driversMu.Lock()
	defer driversMu.Unlock()
	if open == nil {
		panic("storage: Register of a nil opener for scheme " + scheme)
	}
	if _, dup := drivers[scheme]; dup {
		panic("storage: Register called twice for scheme " + scheme)
	}
	drivers[scheme] = open
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	driversMu.RLock()
	defer driversMu.RUnlock()
	schemes := make([]string, 0, len(drivers))
	for s := range drivers {
		schemes = append(schemes, s)
	}
	slices.Sort(schemes)
	return schemes
}

// Open opens the store that rawURL names, with the driver registered for its
// scheme ("file://DIR", "s3://BUCKET/PREFIX?endpoint=HOST:PORT").
func Open(ctx context.Context, rawURL string) (Store, error) {
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("storage: %q is not a store URL such as file://DIR or s3://BUCKET/PREFIX", rawURL)
	}
	driversMu.RLock()
	open := drivers[scheme]
	driversMu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("storage: %q: no driver for scheme %q (registered: %s; import github.com/nerflow/nerflow/storage/all)",
			rawURL, scheme, strings.Join(Schemes(), ", "))
	}
	s, err := open(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("storage: opening %s: %w", Redact(rawURL), err)
	}
	return s, nil
}

// Redact returns rawURL with the values of secret query options
// (secret_key, session_token) replaced by "xxxxx", for logs and errors.
func Redact(rawURL string) string {
	base, query, ok := strings.Cut(rawURL, "?")
	if !ok {
		return rawURL
	}
	opts := strings.Split(query, "&")
	for i, opt := range opts {
		name, _, hasValue := strings.Cut(opt, "=")
		if hasValue && (name == "secret_key" || name == "session_token") {
			opts[i] = name + "=xxxxx"
		}
	}
	return base + "?" + strings.Join(opts, "&")
}
