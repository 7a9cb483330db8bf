// A push-to-pull queue: the worker's messages, handed to Connect as the request stream of the
// bidirectional call. Pushing never blocks; the HTTP/2 stream applies its own flow control.

export class Outbox<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private waiting?: (r: IteratorResult<T>) => void;
  private closed = false;

  /** False once the stream is closed: the message was not sent. */
  push(item: T): boolean {
    if (this.closed) return false;
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = undefined;
      w({ value: item, done: false });
    } else this.items.push(item);
    return true;
  }

  close(): void {
    this.closed = true;
    this.items = [];
    this.waiting?.({ value: undefined, done: true });
    this.waiting = undefined;
  }

  private next(): Promise<IteratorResult<T>> {
    const item = this.items.shift();
    if (item !== undefined) return Promise.resolve({ value: item, done: false });
    if (this.closed) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => (this.waiting = resolve));
  }

  // A generator, because Connect calls throw() and return() on the request iterator.
  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    try {
      for (;;) {
        const r = await this.next();
        if (r.done) return;
        yield r.value;
      }
    } finally {
      this.close();
    }
  }
}
