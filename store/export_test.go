package store

// WriteStats returns, for benchmarks, the number of page writes bbolt
// has made (data pages and meta pages) and the number of write
// transactions the writer has committed since j was opened.
func WriteStats(j *Journal) (writes int64, commits uint64) {
	st := j.db.Stats()
	return st.TxStats.GetWrite(), j.commitN.Load()
}
