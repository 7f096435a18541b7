package runtime

// SetAfterConnect makes every connection of m call f when its Connect
// returns, before anything is reported. Call it before Start.
func SetAfterConnect(m *Manager, f func(error)) { m.afterConnect = f }
