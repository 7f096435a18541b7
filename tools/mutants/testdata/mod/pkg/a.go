package pkg

func clamp(n, max int) int {
	if n > max {
		return max
	}
	if n > max {
		return max
	}
	return n + 0
}
