package jsonvalue

// The heap Decode allocates per value, measured with Go 1.26's maps and
// slices (TestEstimateBoundsTheDecodedHeap holds the estimate to it):
// strings, numbers and keys share the input unless they need unquoting.
const (
	// An empty object's map header; up to 8 members fit in one group.
	emptyMapBytes = 48
	smallMapBytes = 336
	// Larger maps grow by tables; measured 105-160 bytes a member.
	mapMemberBytes = 170
	// A slice in an interface boxes its header; append leaves at most
	// twice the elements' room, and copies once more while it grows.
	sliceHeaderBytes  = 24
	arrayElementBytes = 40
	// A string or number in an interface boxes its header.
	boxedStringBytes = 16
	// Unquoting rewrites a string; an invalid byte becomes U+FFFD.
	unquoteFactor = 3
)

// Estimate returns an upper bound of the heap that decoding data costs,
// without allocating (unless data nests deeper than 16), and the largest
// such cost of one value nested at elementDepth (an object or array inside elementDepth-1 others; a
// ConversionReview's objects are at depth 4). escapeGrowth is how many
// bytes longer than data its strings are once Append writes them again:
// it escapes '<', '>' and '&' (five bytes more each) and U+2028 and U+2029
// (three more) as encoding/json does, so a body of them answers at up to
// six times its size. Malformed input is estimated as far as it can be
// scanned; Decode refuses it anyway.
func Estimate(data string, elementDepth int) (total, largestElement, escapeGrowth int64) {
	type frame struct {
		object, expectKey bool
		members           int64
		start             int64
	}
	// The stack grows only as deep as the input nests: at most MaxDepth.
	var small [16]frame
	stack := small[:0]
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case c == '{' || c == '[':
			if len(stack) > 0 {
				stack[len(stack)-1].members++
			}
			if len(stack) >= MaxDepth {
				return total, largestElement, escapeGrowth
			}
			stack = append(stack, frame{object: c == '{', expectKey: c == '{', start: total})
		case c == '}' || c == ']':
			if len(stack) == 0 {
				return total, largestElement, escapeGrowth
			}
			f := stack[len(stack)-1]
			switch {
			case !f.object:
				total += sliceHeaderBytes + arrayElementBytes*f.members
			case f.members == 0:
				total += emptyMapBytes
			case f.members <= 8:
				total += smallMapBytes
			default:
				total += emptyMapBytes + mapMemberBytes*f.members
			}
			if len(stack) == elementDepth {
				largestElement = max(largestElement, total-f.start)
			}
			stack = stack[:len(stack)-1]
		case c == ',':
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].expectKey = true
			}
		case c == '"':
			start, rewritten := i+1, false
			for i++; ; i++ {
				if i = skipPlainHTML(data, i); i >= len(data) || data[i] == '"' {
					break
				}
				switch c := data[i]; {
				case c == '\\':
					rewritten = true
					i++
				case c == '<' || c == '>' || c == '&':
					escapeGrowth += 5
				case c >= 0x80:
					rewritten = true
					if c == 0xe2 && i+2 < len(data) && data[i+1] == 0x80 && (data[i+2] == 0xa8 || data[i+2] == 0xa9) {
						escapeGrowth += 3 // U+2028, U+2029
					}
				}
			}
			size := int64(min(i, len(data)) - start)
			key := len(stack) > 0 && stack[len(stack)-1].expectKey
			if rewritten {
				total += unquoteFactor * size
			}
			if key {
				stack[len(stack)-1].expectKey = false
				continue
			}
			if size > 0 {
				total += boxedStringBytes
			}
			if len(stack) > 0 {
				stack[len(stack)-1].members++
			}
		case c == '-' || (c >= '0' && c <= '9'):
			for i+1 < len(data) && isNumberByte(data[i+1]) {
				i++
			}
			total += boxedStringBytes
			if len(stack) > 0 {
				stack[len(stack)-1].members++
			}
		case c == 't' || c == 'f' || c == 'n':
			for i+1 < len(data) && data[i+1] >= 'a' && data[i+1] <= 'z' {
				i++
			}
			if len(stack) > 0 {
				stack[len(stack)-1].members++
			}
		}
	}
	return total, largestElement, escapeGrowth
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}
