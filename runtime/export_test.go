package runtime

// SetAfterConnect makes every connection of m call f when its Connect
// returns, before anything is reported. Call it before Start.
func SetAfterConnect(m *Manager, f func(error)) { m.afterConnect = f }

// SetSDKCalls makes m send every tool call through go-sdk's client, none
// on its own (wire_call.go). Call it before Start.
func SetSDKCalls(m *Manager) { m.sdkCalls = true }
