package waymark

// testHooks let the package's tests see and steer moments that have no outside trace. All nil
// outside tests.
type testHooks struct {
	// awaitingRecords is called when an operation is about to wait for step records to be
	// acknowledged (its own batch, or batches other goroutines have in flight).
	awaitingRecords func()
	// runEnded is called when a run has left the worker: its goroutine is done and nothing
	// more will be sent for it.
	runEnded func(workflowID string)
	// welcomed is called each time the server welcomes the worker on a new stream.
	welcomed func()
}
