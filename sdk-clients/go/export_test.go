package waymark

// LoseRunSilently makes the worker forget the run behind ctx without a word to the server,
// as a bug or a lost reply might (see session.lose). Compiled into the package's tests only.
func LoseRunSilently(ctx Context) {
	r := ctx.run()
	r.sess.lose(r)
}
