package waymark

import "sync/atomic"

// LoseRunSilently makes the worker forget the run behind ctx without a word to the server,
// as a bug or a lost reply might (see session.lose). Compiled into the package's tests only.
func LoseRunSilently(ctx Context) {
	r := ctx.run()
	r.sess.lose(r)
}

// CountWelcomes counts the streams on which the server welcomes w, from now on; call before
// Run. A worker that never reconnects is welcomed once.
func CountWelcomes(w *Worker) func() int32 {
	var n atomic.Int32
	w.hooks.welcomed = func() { n.Add(1) }
	return n.Load
}
