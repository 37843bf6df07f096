//! The terminal progress bar of a conversion, drawn from the pipeline's
//! [`ProgressEvent`]s (only when stderr is a terminal).

use std::io::IsTerminal;
use std::sync::Mutex;

use tet::control::{Progress, ProgressEvent};

/// A progress bar on stderr, or `None` when stderr is not a terminal (cron, Slurm, pipes).
pub fn terminal_bar() -> Option<Progress> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar: Mutex<Option<indicatif::ProgressBar>> = Mutex::new(None);
    Some(Progress::new(move |event| {
        let mut slot = bar.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            ProgressEvent::Start { total_bytes } => {
                let b = indicatif::ProgressBar::new(total_bytes);
                b.set_style(
                    indicatif::ProgressStyle::with_template(
                        "{bar:40} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} ETA {eta}",
                    )
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                );
                *slot = Some(b);
            }
            ProgressEvent::Advance { bytes } => {
                if let Some(b) = slot.as_ref() {
                    b.inc(bytes);
                }
            }
            ProgressEvent::Finish => {
                if let Some(b) = slot.take() {
                    b.finish_and_clear();
                }
            }
        }
    }))
}
