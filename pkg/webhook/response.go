package webhook

import (
	"io"
	"sync"
)

// response is a ConversionReview answer built in chunks: a large answer
// never regrows and copies what it holds, so it costs about its own size
// (which reviewCost charges), not twice that.
type response struct {
	full  [][]byte
	out   []byte
	first *[]byte
	// setAside is the capacity of full's chunks; pooled, the first
	// chunk's when the answer began, which the pool holds anyway.
	setAside, pooled int64
}

const (
	// responseChunk is the size at which a chunk is set aside; one
	// object may take it past that.
	responseChunk = 256 << 10
	// maxPooledResponse bounds the first chunks kept between reviews: an
	// idle webhook does not hold large ones.
	maxPooledResponse = 2 * responseChunk
)

// responses are first chunks, reused: most answers (a get, a LIST page of
// small objects) fit in one.
var responses = sync.Pool{New: func() any { return new([]byte) }}

func newResponse() *response {
	first := responses.Get().(*[]byte)
	return &response{out: (*first)[:0], first: first, pooled: int64(cap(*first))}
}

// next sets the chunk aside once it is full, after an object is appended.
func (r *response) next() {
	if len(r.out) >= responseChunk {
		r.setAside += int64(cap(r.out))
		r.full = append(r.full, r.out)
		r.out = make([]byte, 0, responseChunk+responseChunk/4)
	}
}

// reset drops what was appended.
func (r *response) reset() {
	if len(r.full) > 0 {
		r.out = r.full[0]
	}
	r.full, r.out, r.setAside = nil, r.out[:0], 0
}

// size is the memory the answer has taken so far beyond its pooled chunk.
func (r *response) size() int64 { return r.setAside + int64(cap(r.out)) - r.pooled }

func (r *response) writeTo(w io.Writer) {
	for _, b := range r.full {
		if _, err := w.Write(b); err != nil {
			return
		}
	}
	_, _ = w.Write(r.out)
}

// recycle returns the first chunk to the pool; Write keeps nothing of
// what it is given (io.Writer's contract).
func (r *response) recycle() {
	first := r.out
	if len(r.full) > 0 {
		first = r.full[0]
	}
	if cap(first) <= maxPooledResponse {
		*r.first = first[:0]
		responses.Put(r.first)
	}
	r.full, r.out = nil, nil
}
