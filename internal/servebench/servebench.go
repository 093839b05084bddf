// Package servebench puts a running `nerflow serve` under load: clients
// that each send POST /v1/predict again as soon as they are answered, for a
// while, optionally promoting another model version midway through the
// server's own API. It checks every answer as it goes: the status, that an
// answer names the version that tagged it (body and header agree), that a
// version answers a text the same way every time (a model half loaded or
// mixed with another would not), and that a refusal says when to come back
// (Retry-After). `nerflow bench-serve` and the serving tests use it.
package servebench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// VersionHeader is the header in which nerflow serve names the model
// version that answered (server.ModelVersionHeader; not imported, so that
// the load tool does not link the server it measures).
const VersionHeader = "Nerflow-Model-Version"

// Config is one load.
type Config struct {
	// URL is the server's base URL (http://host:port).
	URL string
	// Token is the server's bearer token.
	Token string
	// Clients send requests at once, each its next as soon as it has the
	// answer to the previous one (default 32).
	Clients int
	// Duration is how long requests are sent (default 30s).
	Duration time.Duration
	// Texts are sent as {"text": ...}, in turn (default: a few sentences).
	Texts []string
	// Promote, when set, is the model version (NAME@N) whose promotion to
	// PromoteTag (default production) is asked for PromoteAfter (default
	// half the duration) after the start.
	Promote      string
	PromoteTag   string
	PromoteAfter time.Duration
	// Client sends the requests (default: one with keep-alive connections
	// for every client).
	Client *http.Client
}

// DefaultTexts are sent when Config.Texts is empty: short news sentences
// with names of people and places.
var DefaultTexts = []string{
	"John Smith flew from Paris to Berlin on Monday.",
	"Anna met Carlos Ruiz in Madrid.",
	"The mayor of London spoke to reporters.",
	"Peter visited Rome and Vienna last year.",
	"Maria Garcia works for the city of Lisbon.",
	"Nothing of note happened here.",
}

// Report is what a load measured and found.
type Report struct {
	Clients  int     `json:"clients"`
	Seconds  float64 `json:"seconds"`
	Requests int     `json:"requests"`
	// Codes counts the answers per HTTP status.
	Codes map[int]int `json:"codes"`
	// PerSecond is the answers with status 200 per second.
	PerSecond float64 `json:"per_second"`
	// Latency of the answers with status 200, in milliseconds.
	Latency Latency `json:"latency_ms"`
	// Versions counts the answers with status 200 per model version, and
	// Timeline says when each version answered first and last.
	Versions map[string]int          `json:"versions"`
	Timeline map[string]VersionSpan  `json:"timeline"`
	Digests  map[string]string       `json:"digests"`
	Problems []string                `json:"problems"`
	Refused  int                     `json:"refused"` // 429 and 503 with Retry-After
	Promoted *Promotion              `json:"promoted,omitempty"`
	counts   map[string]int          // problem kind -> count, for Problems
	examples map[string]string       // problem kind -> first example
	answers  map[string]string       // version and text -> entities
	latency  []time.Duration         // of answers with status 200
	spans    map[string]*VersionSpan // version -> first and last answer
	// refused503 counts the 503s with Retry-After among Refused.
	refused503 int
}

// Latency is a distribution, in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// VersionSpan is when a version answered, in seconds from the start.
type VersionSpan struct {
	First float64 `json:"first_s"`
	Last  float64 `json:"last_s"`
}

// Promotion is the promotion asked for midway.
type Promotion struct {
	Ref string  `json:"ref"`
	Tag string  `json:"tag"`
	At  float64 `json:"at_s"` // when the server confirmed it, from the start
}

// answer is what a client keeps of an answer with status 200.
type answer struct {
	Model struct {
		Version string `json:"version"`
		Digest  string `json:"digest"`
	} `json:"model"`
	Results []struct {
		Entities []struct {
			Type       string `json:"type"`
			TokenStart int    `json:"token_start"`
			TokenEnd   int    `json:"token_end"`
		} `json:"entities"`
	} `json:"results"`
}

// Run puts the server under load. Its error is for a load that could not
// be made (a bad configuration, a promotion the server refused); what the
// answers got wrong is in the report's Problems.
func Run(ctx context.Context, c Config) (*Report, error) {
	if c.URL == "" || c.Token == "" {
		return nil, errors.New("servebench: the server's URL and token are required")
	}
	if _, err := url.Parse(c.URL); err != nil {
		return nil, fmt.Errorf("servebench: %w", err)
	}
	c.URL = strings.TrimSuffix(c.URL, "/")
	if c.Clients <= 0 {
		c.Clients = 32
	}
	if c.Duration <= 0 {
		c.Duration = 30 * time.Second
	}
	if len(c.Texts) == 0 {
		c.Texts = DefaultTexts
	}
	if c.PromoteTag == "" {
		c.PromoteTag = "production"
	}
	if c.PromoteAfter <= 0 {
		c.PromoteAfter = c.Duration / 2
	}
	if c.Client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = c.Clients
		c.Client = &http.Client{Transport: tr, Timeout: time.Minute}
	}
	bodies := make([][]byte, len(c.Texts))
	for i, text := range c.Texts {
		bodies[i], _ = json.Marshal(map[string]string{"text": text})
	}
	r := &Report{Clients: c.Clients, Codes: map[int]int{}, Versions: map[string]int{}, Digests: map[string]string{},
		counts: map[string]int{}, examples: map[string]string{}, answers: map[string]string{}, spans: map[string]*VersionSpan{}}
	var mu sync.Mutex
	start := time.Now()
	deadline := start.Add(c.Duration)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	var (
		wg         sync.WaitGroup
		promoteErr error
	)
	if c.Promote != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ctx.Done():
				promoteErr = fmt.Errorf("servebench: the load ended before the promotion of %s", c.Promote)
				return
			case <-time.After(c.PromoteAfter):
			}
			if err := promote(ctx, c); err != nil {
				promoteErr = err
				return
			}
			mu.Lock()
			r.Promoted = &Promotion{Ref: c.Promote, Tag: c.PromoteTag, At: time.Since(start).Seconds()}
			mu.Unlock()
		}()
	}
	for client := range c.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				i := (client + n*c.Clients) % len(bodies)
				wait := r.send(ctx, c, bodies[i], i, start, &mu)
				if wait > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(wait):
					}
				}
			}
		}()
	}
	wg.Wait()
	r.finish(time.Since(start))
	return r, promoteErr
}

// send makes one request and records its answer. It returns how long the
// client should wait before its next request (a refusal's Retry-After, or
// a moment after a failed connection).
func (r *Report) send(ctx context.Context, c Config, body []byte, text int, start time.Time, mu *sync.Mutex) time.Duration {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL+"/v1/predict", bytes.NewReader(body))
	if err != nil {
		panic(err) // the URL was parsed
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Content-Type", "application/json")
	sent := time.Now()
	res, err := c.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0 // the load ended while it waited: not the server's fault
		}
		mu.Lock()
		r.problem("transport", err.Error())
		mu.Unlock()
		return 100 * time.Millisecond
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	took := time.Since(sent)
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			r.problem("transport", err.Error())
		}
		return 0
	}
	r.Requests++
	r.Codes[res.StatusCode]++
	switch {
	case res.StatusCode == http.StatusOK:
		r.latency = append(r.latency, took)
		r.check(res, b, text, time.Since(start))
	case res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable:
		secs, err := strconv.Atoi(res.Header.Get("Retry-After"))
		if err != nil || secs < 0 {
			r.problem("refused without Retry-After", fmt.Sprintf("%d %s", res.StatusCode, firstLine(b)))
			return 100 * time.Millisecond
		}
		r.Refused++
		if res.StatusCode == http.StatusServiceUnavailable {
			r.refused503++
		}
		return time.Duration(secs) * time.Second
	case res.StatusCode >= 500:
		r.problem("server error", fmt.Sprintf("%d %s", res.StatusCode, firstLine(b)))
	default:
		r.problem("unexpected status", fmt.Sprintf("%d %s", res.StatusCode, firstLine(b)))
	}
	return 0
}

// check records an answer with status 200: its version, and whether it is
// what this version answered to the same text before.
func (r *Report) check(res *http.Response, b []byte, text int, at time.Duration) {
	var a answer
	if err := json.Unmarshal(b, &a); err != nil {
		r.problem("unreadable answer", err.Error())
		return
	}
	v := a.Model.Version
	if v == "" {
		r.problem("answer without a version", firstLine(b))
		return
	}
	if h := res.Header.Get(VersionHeader); h != v {
		r.problem("version header differs from the body", fmt.Sprintf("header %q, body %q", h, v))
	}
	r.Versions[v]++
	s := r.spans[v]
	if s == nil {
		s = &VersionSpan{First: at.Seconds()}
		r.spans[v] = s
	}
	s.Last = at.Seconds()
	if d, ok := r.Digests[v]; !ok {
		r.Digests[v] = a.Model.Digest
	} else if d != a.Model.Digest {
		r.problem("a version answered with two digests", fmt.Sprintf("version %s: %s and %s", v, d, a.Model.Digest))
	}
	// Confidences may differ in their last digits with the batch a text
	// shares a forward pass with; the entities a model finds do not.
	var sig strings.Builder
	for _, res := range a.Results {
		for _, e := range res.Entities {
			fmt.Fprintf(&sig, "%s:%d-%d ", e.Type, e.TokenStart, e.TokenEnd)
		}
		sig.WriteString("| ")
	}
	key := v + "\x00" + strconv.Itoa(text)
	if before, ok := r.answers[key]; !ok {
		r.answers[key] = sig.String()
	} else if before != sig.String() {
		r.problem("a version answered a text two ways", fmt.Sprintf("version %s, text %d: %q, then %q", v, text, before, sig.String()))
	}
}

func (r *Report) problem(kind, example string) {
	if r.counts[kind] == 0 {
		r.examples[kind] = example
	}
	r.counts[kind]++
}

func (r *Report) finish(took time.Duration) {
	r.Seconds = took.Seconds()
	r.PerSecond = float64(len(r.latency)) / took.Seconds()
	sort.Slice(r.latency, func(i, j int) bool { return r.latency[i] < r.latency[j] })
	r.Latency = Latency{P50: r.quantile(0.5), P90: r.quantile(0.9), P99: r.quantile(0.99), Max: r.quantile(1)}
	r.Timeline = map[string]VersionSpan{}
	for v, s := range r.spans {
		r.Timeline[v] = *s
	}
	kinds := make([]string, 0, len(r.counts))
	for k := range r.counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	r.Problems = []string{}
	for _, k := range kinds {
		r.Problems = append(r.Problems, fmt.Sprintf("%s: %d (first: %s)", k, r.counts[k], r.examples[k]))
	}
}

// quantile q of the sorted latencies, in milliseconds (nearest rank).
func (r *Report) quantile(q float64) float64 {
	if len(r.latency) == 0 {
		return 0
	}
	i := int(q*float64(len(r.latency))+0.5) - 1
	i = min(max(i, 0), len(r.latency)-1)
	return float64(r.latency[i].Microseconds()) / 1000
}

// ServerErrors counts the answers with a 5xx status other than a 503 that
// said when to come back.
func (r *Report) ServerErrors() int {
	n := 0
	for code, k := range r.Codes {
		if code >= 500 {
			n += k
		}
	}
	return n - r.refused503
}

// Print writes the report for a person.
func (r *Report) Print(w io.Writer) {
	codes := make([]int, 0, len(r.Codes))
	for c := range r.Codes {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var cs []string
	for _, c := range codes {
		cs = append(cs, fmt.Sprintf("%d: %d", c, r.Codes[c]))
	}
	fmt.Fprintf(w, "%d clients, %.1f s: %d requests (%s), %.0f answers/s\n", r.Clients, r.Seconds, r.Requests, strings.Join(cs, ", "), r.PerSecond)
	fmt.Fprintf(w, "latency of the answers: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms\n", r.Latency.P50, r.Latency.P90, r.Latency.P99, r.Latency.Max)
	if r.Promoted != nil {
		fmt.Fprintf(w, "promoted %s to %s at %.2f s\n", r.Promoted.Ref, r.Promoted.Tag, r.Promoted.At)
	}
	versions := make([]string, 0, len(r.Versions))
	for v := range r.Versions {
		versions = append(versions, v)
	}
	sort.Slice(versions, func(i, j int) bool { return r.Timeline[versions[i]].First < r.Timeline[versions[j]].First })
	for _, v := range versions {
		s := r.Timeline[v]
		fmt.Fprintf(w, "version %s: %d answers, from %.2f s to %.2f s\n", v, r.Versions[v], s.First, s.Last)
	}
	if r.Refused > 0 {
		fmt.Fprintf(w, "refused with Retry-After (429/503): %d\n", r.Refused)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "PROBLEM %s\n", p)
	}
}

// promote asks the server to move the tag to the version.
func promote(ctx context.Context, c Config) error {
	body, _ := json.Marshal(map[string]string{"tag": c.PromoteTag})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL+"/api/v1/models/"+url.PathEscape(c.Promote)+"/promote", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("servebench: promoting %s: %w", c.Promote, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	res, err := c.Client.Do(req)
	if err != nil {
		return fmt.Errorf("servebench: promoting %s: %w", c.Promote, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("servebench: promoting %s: %d %s", c.Promote, res.StatusCode, firstLine(b))
	}
	return nil
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
