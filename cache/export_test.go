package cache

// Len is the length of the answer AppendAnswer appends, before the
// caller's OPT record; 0 for a remembered failure. Only tests ask.
func (h Hit) Len() int { return len(h.it.data) }
