//! Store-call latency for the metrics, from the spans every store call opens
//! (`#[tracing::instrument(name = "store.<call>", target = "waymark::store")]` on each method of
//! the store's SQL, written once for both backends): this layer times each such span from its
//! creation to its close and observes the histogram `waymark_store_call_duration_seconds{call}`.
//! Nothing else watches these spans unless spans are exported, so a call pays for one span —
//! and for none when the replica has no metrics listener: the layer is then not installed.

use std::time::Instant;

use tracing::{span, Subscriber};
use tracing_subscriber::{layer::Context, registry::LookupSpan, Layer};

use super::metrics::{metrics, StoreCallLabels};

/// The target store spans are opened under.
pub const TARGET: &str = "waymark::store";

pub struct StoreCalls;

struct Began(Instant);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for StoreCalls {
    fn on_new_span(&self, _attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Began(Instant::now()));
        }
    }

    fn on_close(&self, id: span::Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(began) = span.extensions().get::<Began>().map(|b| b.0) else {
            return;
        };
        let call = span.name().strip_prefix("store.").unwrap_or(span.name());
        metrics()
            .store_call_duration
            .get_or_create(&StoreCallLabels { call })
            .observe(began.elapsed().as_secs_f64());
    }
}
