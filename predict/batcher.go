package predict

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/kit"
)

// Request is one call: raw texts (tokenized by Tokenize, split into
// sentences), or sentences already split into tokens.
type Request struct {
	Texts     []string   `json:"texts,omitempty"`
	Sentences [][]string `json:"sentences,omitempty"`
}

// Result is what one text or sentence of a request gave.
type Result struct {
	// Tokens of a raw text, with their offsets (absent for pre-tokenized
	// input, whose tokens the caller has).
	Tokens   []Token  `json:"tokens,omitempty"`
	Entities []Entity `json:"entities"`
}

// Response answers a Request: one Result per text, or per sentence.
type Response struct {
	Model   Info     `json:"model"`
	Results []Result `json:"results"`
	// TokenCount is the number of tokens tagged.
	TokenCount int `json:"token_count"`
}

// ErrNoModel is returned while no model is loaded.
var ErrNoModel = errors.New("no model loaded")

// ErrInvalid wraps the errors of malformed requests.
var ErrInvalid = errors.New("invalid request")

// ErrOverloaded is returned, at once, to a request that finds the queue
// full: a client told to come back later costs less than one left waiting
// behind a backlog that only grows.
var ErrOverloaded = errors.New("overloaded: the prediction queue is full")

// Options configure a Batcher.
type Options struct {
	// MaxBatch is the most sentences tagged in one forward pass (default
	// 64). A request larger than that is tagged in several.
	MaxBatch int
	// MaxWait is how long the first request of a batch waits for others
	// to join it (default 2ms). Zero waits for nothing: a batch holds the
	// requests that queued while the previous one ran, which under load
	// is already most of the gain; see the serving benchmark.
	MaxWait time.Duration
	// Queue is how many requests may wait for the tagger (default 1024),
	// besides the batch it tags; beyond it Predict fails with
	// ErrOverloaded.
	Queue int
}

// Batcher answers requests with one model, tagging the sentences of the
// requests that arrive together in one forward pass. A single goroutine
// owns the model (libtorch calls are serialized anyway), so swapping it
// for a new version never races a prediction.
type Batcher struct {
	opts  Options
	jobs  chan *job
	swaps chan swap
	done  chan struct{}
	model *Model // owned by loop
}

type job struct {
	ctx   context.Context
	words [][]string
	resp  chan jobResult
}

type jobResult struct {
	model *Model
	preds []dataset.Prediction
	err   error
}

type swap struct {
	m    *Model
	done chan struct{}
}

// NewBatcher starts a batcher with model m (nil: none yet, see Swap).
func NewBatcher(m *Model, opts Options) *Batcher {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 64
	}
	if opts.MaxWait < 0 {
		opts.MaxWait = 0
	}
	if opts.Queue <= 0 {
		opts.Queue = 1024
	}
	b := &Batcher{opts: opts, jobs: make(chan *job, opts.Queue), swaps: make(chan swap), done: make(chan struct{}), model: m}
	// The loop tags on one OS thread for its lifetime, so libtorch's
	// OpenMP team is made once rather than per batch (and it counts as one
	// computation in the process's share of the cores; see
	// kit.OnComputeThread).
	go kit.OnComputeThread(func(func()) { b.loop() })
	return b
}

// Swap replaces the model; the old one is closed once the batch in flight
// is answered. It returns when the new model serves.
func (b *Batcher) Swap(m *Model) {
	s := swap{m: m, done: make(chan struct{})}
	select {
	case b.swaps <- s:
		<-s.done
	case <-b.done:
		m.Close()
	}
}

// Close stops the batcher and frees its model. Requests still queued fail.
func (b *Batcher) Close() {
	select {
	case <-b.done:
	default:
		close(b.done)
	}
}

// Predict answers a request.
func (b *Batcher) Predict(ctx context.Context, req Request) (*Response, error) {
	in, err := prepare(req)
	if err != nil {
		return nil, err
	}
	j := &job{ctx: ctx, words: in.words, resp: make(chan jobResult, 1)}
	select {
	case <-b.done:
		return nil, errors.New("predictor closed")
	default:
	}
	select {
	case b.jobs <- j:
	default:
		return nil, fmt.Errorf("%w (%d requests waiting)", ErrOverloaded, cap(b.jobs))
	}
	var r jobResult
	select {
	case r = <-j.resp:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if r.err != nil {
		return nil, r.err
	}
	// Decoding reads only the tag set, plain Go data that stays valid after
	// a swap closes the model's weights.
	return r.model.assemble(req, in, r.preds)
}

// prepared is a request split into the sentences the tagger sees.
type prepared struct {
	words [][]string
	toks  [][][]Token // per text, its sentences' tokens
}

func prepare(req Request) (prepared, error) {
	var in prepared
	if len(req.Texts) > 0 && len(req.Sentences) > 0 {
		return in, fmt.Errorf("%w: give texts or sentences, not both", ErrInvalid)
	}
	for _, text := range req.Texts {
		sents := Tokenize(text)
		in.toks = append(in.toks, sents)
		for _, s := range sents {
			w := make([]string, len(s))
			for i, t := range s {
				w[i] = t.Text
			}
			in.words = append(in.words, w)
		}
	}
	for i, s := range req.Sentences {
		if len(s) == 0 {
			return in, fmt.Errorf("%w: sentence %d has no tokens", ErrInvalid, i+1)
		}
		for j, w := range s {
			if w == "" {
				return in, fmt.Errorf("%w: sentence %d: token %d is empty", ErrInvalid, i+1, j+1)
			}
		}
		in.words = append(in.words, s)
	}
	return in, nil
}

// assemble turns the predictions of a prepared request's sentences into
// its response.
func (m *Model) assemble(req Request, in prepared, preds []dataset.Prediction) (*Response, error) {
	resp := &Response{Model: m.Info, Results: []Result{}}
	next := 0
	for ti, text := range req.Texts {
		res := Result{Entities: []Entity{}, Tokens: []Token{}}
		for _, s := range in.toks[ti] {
			ents, err := m.entities(in.words[next], preds[next], text, s)
			if err != nil {
				return nil, err
			}
			next++
			res.Entities = append(res.Entities, ents...)
			res.Tokens = append(res.Tokens, s...)
		}
		resp.Results = append(resp.Results, res)
	}
	for range req.Sentences {
		ents, err := m.entities(in.words[next], preds[next], "", nil)
		if err != nil {
			return nil, err
		}
		next++
		resp.Results = append(resp.Results, Result{Entities: ents})
	}
	for _, w := range in.words {
		resp.TokenCount += len(w)
	}
	return resp, nil
}

// Annotate answers a request with m directly, batchSize sentences per
// forward pass, for callers that own the model (the predict stage).
func (m *Model) Annotate(req Request, batchSize int) (*Response, error) {
	in, err := prepare(req)
	if err != nil {
		return nil, err
	}
	var preds []dataset.Prediction
	if len(in.words) > 0 {
		if preds, err = m.tag(in.words, batchSize); err != nil {
			return nil, err
		}
	}
	return m.assemble(req, in, preds)
}

// loop owns the model: it takes the first waiting job, gathers the jobs
// that arrive within MaxWait up to MaxBatch sentences, and tags them all
// at once.
func (b *Batcher) loop() {
	defer func() {
		if b.model != nil {
			b.model.Close()
		}
	}()
	var pending *job // a job that did not fit the previous batch
	for {
		// A new model, or the end, goes before the next batch: under a
		// load that keeps the queue full, every batch leaves a job
		// pending, and the select below is never reached.
		select {
		case s := <-b.swaps:
			b.swap(s)
		case <-b.done:
			return
		default:
		}
		first := pending
		pending = nil
		if first == nil {
			select {
			case first = <-b.jobs:
			case s := <-b.swaps:
				b.swap(s)
				continue
			case <-b.done:
				return
			}
		}
		batch := []*job{first}
		n := len(first.words)
		var timeout <-chan time.Time
		if b.opts.MaxWait > 0 {
			timeout = time.After(b.opts.MaxWait)
		}
	gather:
		for n < b.opts.MaxBatch {
			var j *job
			if timeout == nil {
				select {
				case j = <-b.jobs:
				default:
					break gather
				}
			} else {
				select {
				case j = <-b.jobs:
				case <-timeout:
					break gather
				}
			}
			if n+len(j.words) > b.opts.MaxBatch {
				pending = j
				break
			}
			batch = append(batch, j)
			n += len(j.words)
		}
		b.run(batch)
	}
}

func (b *Batcher) swap(s swap) {
	if b.model != nil {
		b.model.Close()
	}
	b.model = s.m
	close(s.done)
}

// run tags the sentences of a batch's live jobs in one call and answers
// each job with its share.
func (b *Batcher) run(batch []*job) {
	if b.model == nil {
		for _, j := range batch {
			j.resp <- jobResult{err: ErrNoModel}
		}
		return
	}
	var words [][]string
	live := batch[:0]
	for _, j := range batch {
		if j.ctx.Err() != nil {
			continue // the caller gave up: do not spend the tagger on it
		}
		live = append(live, j)
		words = append(words, j.words...)
	}
	if len(words) == 0 {
		for _, j := range live {
			j.resp <- jobResult{model: b.model}
		}
		return
	}
	preds, err := b.model.tag(words, b.opts.MaxBatch)
	off := 0
	for _, j := range live {
		r := jobResult{model: b.model, err: err}
		if err == nil {
			r.preds = preds[off : off+len(j.words)]
		}
		off += len(j.words)
		j.resp <- r
	}
}
