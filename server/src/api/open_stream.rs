//! The body of a call's answer, as the authentication layer hands it on: as it came, or — for a
//! stream anyone may open without a key (health `Watch`, reflection) — holding that caller's
//! place among its address's open streams, and ended with `DEADLINE_EXCEEDED` once it has been
//! open for [`STREAM_DEADLINE`](crate::auth::peers::STREAM_DEADLINE). A watcher reconnects; a
//! peer that opens streams to hold them gets no more than its places, for no longer than that.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::OwnedSemaphorePermit;

#[derive(Default)]
pub struct AnswerBody<B> {
    inner: B,
    /// For an unauthenticated stream: its place, and when it ends.
    bound: Option<Bound>,
    ended: bool,
}

struct Bound {
    _place: Option<OwnedSemaphorePermit>,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl<B> AnswerBody<B> {
    pub fn plain(inner: B) -> Self {
        AnswerBody {
            inner,
            bound: None,
            ended: false,
        }
    }

    /// `inner`, holding `place` and ended after `open_for`.
    pub fn bounded(inner: B, place: Option<OwnedSemaphorePermit>, open_for: std::time::Duration) -> Self {
        AnswerBody {
            inner,
            bound: Some(Bound {
                _place: place,
                deadline: Box::pin(tokio::time::sleep(open_for)),
            }),
            ended: false,
        }
    }
}

impl<B> Body for AnswerBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        if let Some(b) = &mut self.bound {
            if b.deadline.as_mut().poll(cx).is_ready() {
                // The stream's end, as gRPC spells it: trailers with the status.
                self.ended = true;
                self.bound = None;
                let mut trailers = http::HeaderMap::new();
                trailers.insert(
                    "grpc-status",
                    http::HeaderValue::from(tonic::Code::DeadlineExceeded as i32),
                );
                trailers.insert(
                    "grpc-message",
                    http::HeaderValue::from_static("an unauthenticated stream is open for at most 5 minutes"),
                );
                return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
            }
        }
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.ended = true;
            self.bound = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.ended || (self.bound.is_none() && self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        if self.bound.is_some() {
            SizeHint::default()
        } else {
            self.inner.size_hint()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    /// A body that never ends (a watch with nothing new to say).
    #[derive(Default)]
    struct Endless;

    impl Body for Endless {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Pending
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_bounded_stream_ends_with_deadline_exceeded_and_gives_its_place_back() {
        let places = std::sync::Arc::new(tokio::sync::Semaphore::new(1));
        let place = places.clone().try_acquire_owned().unwrap();
        let mut body = AnswerBody::bounded(Endless, Some(place), std::time::Duration::from_secs(300));
        assert_eq!(places.available_permits(), 0);
        let frame = body.frame().await.unwrap().unwrap();
        let trailers = frame.into_trailers().expect("trailers");
        assert_eq!(trailers["grpc-status"], "4");
        assert_eq!(places.available_permits(), 1, "the place is free once the stream ends");
        assert!(body.frame().await.is_none() && body.is_end_stream());
    }

    #[tokio::test]
    async fn a_plain_body_passes_through() {
        let mut body = AnswerBody::plain(http_body_util::Full::new(Bytes::from_static(b"x")));
        let data = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&data[..], b"x");
        assert!(body.frame().await.is_none());
    }
}
