package webhook

import (
	"errors"
	"io"
	"math"
	"sync"

	"github.com/materializeinc/orchestratord/pkg/jsonvalue"
)

// Memory admission. A review is charged for what it holds, when it holds
// it: its body buffer as the bytes arrive (a client that only declares a
// Content-Length holds nothing), then, before it is decoded, the heap that
// decoding, converting and answering it will cost, estimated from the body
// by jsonvalue.Estimate (an upper bound: TestChargeBoundsThePeakHeap and
// BenchmarkReviewPeakHeap). Per byte of body that ranges from about 8 for
// realistic objects to about 40 for the shapes a tenant can write that cost
// the most (many one-member maps), so bodies alone cannot size admission.
const (
	// DefaultMaxInFlightMemory is the budget without a memory limit.
	DefaultMaxInFlightMemory = 192 << 20
	// memoryReserve is what the process needs besides what the budget
	// charges (reviews, connections, requests): the runtime, the client
	// that maintains the certificate, metrics.
	memoryReserve = 64 << 20
	// minInFlightMemory keeps a tiny limit from refusing every review.
	minInFlightMemory = 16 << 20
	// objectsDepth is where a ConversionReview's objects nest:
	// {"request":{"objects":[{...}]}}.
	objectsDepth = 4
	// bodyChunk is the least a body buffer grows by.
	bodyChunk = 64 << 10
)

// InFlightMemoryFor is the in-flight budget for a Go memory limit
// (debug.SetMemoryLimit(-1): GOMEMLIMIT, or --memory-limit's 90% of the
// container's): all of it but memoryReserve.
func InFlightMemoryFor(goMemoryLimit int64) int64 {
	if goMemoryLimit <= 0 || goMemoryLimit == math.MaxInt64 {
		return DefaultMaxInFlightMemory
	}
	return max(goMemoryLimit-memoryReserve, minInFlightMemory)
}

// reviewCost is the heap a review of body costs beyond its body buffer:
// the decoded objects, the conversion of the largest one (a copy, and
// its carry annotation) and the response, which append may leave at up to
// twice the size it grows to, and which escaping may make up to six times
// the body's (escapeGrowth). responseShare is the response's part of it;
// carry annotations beyond it are charged as the response grows
// (ConvertHandler.convert).
func reviewCost(body string) (cost, responseShare int64) {
	decoded, largest, escapeGrowth := jsonvalue.Estimate(body, objectsDepth)
	responseShare = 2 * (int64(len(body)) + escapeGrowth)
	return decoded + 2*largest + int64(len(body)) + responseShare + 4096, responseShare
}

// errNoMemory is a body that outgrew the in-flight budget while it arrived.
var errNoMemory = errors.New("in-flight memory exhausted")

// budget is the memory and the number of reviews in flight.
//
// Open connections are charged from the same memory but counted apart:
// they may hold at most half of it, and reviews (their bodies and requests)
// leave connectionReserve free for new connections while connections hold
// less than that. A client whose connection was closed (asked to leave at
// the connection cap, or after a 429 over HTTP/1.1) can then always come
// back while large reviews fill the rest of the budget, instead of having
// its new connection refused.
type budget struct {
	mu              sync.Mutex
	memory, reviews int64
	connections     int64
	// peak is the most memory charged at once, which the tests hold to
	// the heap the reviews took.
	peak int64
}

// connectionReserve is the memory reviews leave for new connections: 16 of
// them.
const connectionReserve = 16 * connectionMemory

// forReviewsLocked is what reviews may take of limit.
func (b *budget) forReviewsLocked(limit int64) int64 {
	return limit - max(0, connectionReserve-b.connections)
}

// charge charges n for a review (its body as it arrives, a request) while
// what is charged stays within limit, less the connections' reserve.
func (b *budget) charge(n, limit int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.memory+n > b.forReviewsLocked(limit) {
		return false
	}
	b.memory += n
	b.peak = max(b.peak, b.memory)
	return true
}

// couldCharge reports whether n could be charged now, charging nothing.
func (b *budget) couldCharge(n, limit int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.memory+n <= b.forReviewsLocked(limit)
}

// leastChargeFor is the least a review of a body of n bytes is charged:
// its buffer, and reviewCost's body copy, its response share (twice the
// body) and its slack.
func leastChargeFor(n int64) int64 {
	return 4*n + 4097
}

func (b *budget) refund(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.memory -= n
}

// chargeConnection charges an open connection's memory while connections
// hold at most half of limit and everything charged stays within it.
func (b *budget) chargeConnection(n, limit int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.connections+n > limit/2 || b.memory+n > limit {
		return false
	}
	b.memory += n
	b.connections += n
	return true
}

func (b *budget) refundConnection(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.memory -= n
	b.connections -= n
}

// admitReview charges a review's cost and takes one of maxReviews slots.
func (b *budget) admitReview(cost, limit, maxReviews int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reviews >= maxReviews || b.memory+cost > b.forReviewsLocked(limit) {
		return false
	}
	b.reviews++
	b.memory += cost
	b.peak = max(b.peak, b.memory)
	return true
}

func (b *budget) releaseReview(cost int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reviews--
	b.memory -= cost
}

// readCharged reads all of body into a buffer that grows as bytes arrive,
// charging each growth to charge before it is allocated; charged is what
// the returned buffer holds, which the caller refunds. The buffer grows to
// the declared length at most (a body that says it is short cannot make
// the server allocate for a long one), and to limit, what body may hold
// (its reader fails past it), plus one byte.
func readCharged(body io.Reader, declared, limit int64, charge func(int64) bool, refund func(int64)) (b []byte, charged int64, err error) {
	grow := func(to int64) error {
		if !charge(to) {
			return errNoMemory
		}
		next := make([]byte, len(b), to)
		copy(next, b)
		refund(charged)
		b, charged = next, to
		return nil
	}
	for {
		if len(b) == cap(b) {
			// One byte past the declared length sees the end of the body
			// without growing again. With a declared length, four times
			// what arrived (a 0.6 MiB LIST page is read in three buffers,
			// not five); without one, twice: a client that stops sending
			// holds at most that much more than it sent.
			next := max(2*int64(cap(b)), bodyChunk)
			if declared >= 0 {
				next = min(max(4*int64(cap(b)), bodyChunk), declared+1)
			}
			next = min(next, limit+1)
			if next <= int64(cap(b)) {
				next = int64(cap(b)) + bodyChunk
			}
			if err := grow(next); err != nil {
				return b, charged, err
			}
		}
		n, rerr := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if rerr == io.EOF {
			return b, charged, nil
		}
		if rerr != nil {
			return b, charged, rerr
		}
	}
}
