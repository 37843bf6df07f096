//! How a front end watches and stops a conversion: a progress callback and a cancellation
//! token, handed to the pipeline in [`crate::pipeline::ConvertOptions`].
//!
//! The engine reads no process globals: the CLI turns SIGTERM/SIGINT into a [`Cancel`] and draws
//! its progress bar from [`ProgressEvent`]s; the Python package does the same with its own
//! callbacks. Both are checked between chunks, on the worker threads, so they must be cheap and
//! thread-safe.

use std::fmt;
use std::sync::Arc;

/// What a conversion reports while it runs, in stored-dataset bytes (before compression).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressEvent {
    /// The chunk work begins: `total_bytes` raw bytes will be produced.
    Start { total_bytes: u64 },
    /// One more chunk of `bytes` raw bytes is done (called from worker threads, any order).
    Advance { bytes: u64 },
    /// The chunk work ended, successfully or not (always sent after `Start`).
    Finish,
}

/// A progress callback; cloning shares it.
#[derive(Clone)]
pub struct Progress(Arc<dyn Fn(ProgressEvent) + Send + Sync>);

impl Progress {
    /// Calls `f` with every event.
    pub fn new(f: impl Fn(ProgressEvent) + Send + Sync + 'static) -> Progress {
        Progress(Arc::new(f))
    }

    /// Reports `event`.
    pub fn report(&self, event: ProgressEvent) {
        (self.0)(event)
    }
}

impl fmt::Debug for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Progress(..)")
    }
}

/// A cancellation token: asked between chunks whether the conversion must stop, and why (a
/// signal number, or any code the front end chooses). The default never cancels.
#[derive(Clone, Default)]
pub struct Cancel(Option<Arc<dyn Fn() -> Option<i32> + Send + Sync>>);

impl Cancel {
    /// A token that never cancels.
    pub fn never() -> Cancel {
        Cancel(None)
    }

    /// A token that asks `f`; `Some(code)` stops the conversion with
    /// [`crate::pipeline::ConvertError::Interrupted`]`(code)`.
    pub fn from_fn(f: impl Fn() -> Option<i32> + Send + Sync + 'static) -> Cancel {
        Cancel(Some(Arc::new(f)))
    }

    /// Whether (and why) the conversion must stop now.
    pub fn requested(&self) -> Option<i32> {
        self.0.as_ref().and_then(|f| f())
    }
}

impl fmt::Debug for Cancel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Cancel(..)"
        } else {
            "Cancel::never"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn cancel_asks_its_function() {
        assert_eq!(Cancel::never().requested(), None);
        assert_eq!(Cancel::default().requested(), None);
        assert_eq!(Cancel::from_fn(|| Some(15)).requested(), Some(15));
    }

    #[test]
    fn progress_reaches_the_callback() {
        let seen = Arc::new(AtomicU64::new(0));
        let s = seen.clone();
        let p = Progress::new(move |e| {
            if let ProgressEvent::Advance { bytes } = e {
                s.fetch_add(bytes, Ordering::Relaxed);
            }
        });
        p.clone().report(ProgressEvent::Advance { bytes: 7 });
        p.report(ProgressEvent::Advance { bytes: 5 });
        assert_eq!(seen.load(Ordering::Relaxed), 12);
    }
}
