//! The public surface every async adapter shares, written once.

/// Define an async adapter's `Builder` and `PushConsumer` on a runtime: `$runtime` is a function
/// returning `Result<impl Runtime, StartError>` (the runtime to start on).
#[macro_export]
macro_rules! async_adapter {
    ($runtime:path) => {
        /// Builder for [`PushConsumer`].
        pub struct Builder {
            options: $crate::ConsumerOptions,
            listener: Option<$crate::run::Listener>,
        }

        impl Builder {
            $crate::forward_options!();

            /// An async listener (`MessageListenerConcurrently`): `consumeThreadMin` workers run
            /// it, each one batch at a time. Return a `ConsumeStatus`, or `ctx.result(status)`
            /// after setting `ack_index` or the delay level — or either in a `Result`, so `?`
            /// works: an `Err`, like a panic, counts as RECONSUME_LATER and is logged.
            pub fn listener<F, Fut, R>(mut self, f: F) -> Self
            where
                F: Fn($crate::__core::Messages, $crate::__core::ConsumeContext) -> Fut
                    + Send
                    + Sync
                    + 'static,
                Fut: ::std::future::Future<Output = R> + Send + 'static,
                R: $crate::ListenerOutput,
            {
                self.listener = Some($crate::run::Listener::Async($crate::async_listener(f)));
                self
            }

            /// A blocking listener, run on threads of its own (at most `consumeThreadMin` at
            /// once). It takes and answers what [`listener`](Self::listener) does, `Result`
            /// included.
            pub fn blocking_listener<R: $crate::ListenerOutput>(
                mut self,
                f: impl Fn($crate::__core::Messages, $crate::__core::ConsumeContext) -> R
                + Send
                + Sync
                + 'static,
            ) -> Self {
                self.listener = Some($crate::run::Listener::Sync($crate::sync_listener(f)));
                self
            }

            /// An async orderly listener (`MessageListenerOrderly`): one batch per queue at a
            /// time, in offset order, under a broker lock.
            pub fn orderly_listener<F, Fut, R>(self, f: F) -> Self
            where
                F: Fn($crate::__core::Messages, $crate::__core::ConsumeContext) -> Fut
                    + Send
                    + Sync
                    + 'static,
                Fut: ::std::future::Future<Output = R> + Send + 'static,
                R: $crate::ListenerOutput,
            {
                self.listener(f).orderly()
            }

            /// Start. Errors name the invalid setting; unreachable servers are reported as
            /// events (and logged) and retried.
            pub fn start(self) -> Result<PushConsumer, $crate::StartError> {
                let listener = self.listener.clone().ok_or($crate::StartError::NoListener)?;
                let handle = $crate::run::start($runtime()?, self.options, listener)?;
                Ok(PushConsumer { handle })
            }

            /// Start with no listener: batches arrive on the returned stream; answer each
            /// [`Delivery`] (`ack`, `ack_up_to`, `reconsume_later`). One dropped unanswered
            /// counts as RECONSUME_LATER, so no batch is ever left without a result.
            pub fn start_stream(self) -> Result<(PushConsumer, $crate::run::Deliveries), $crate::StartError> {
                let (tx, deliveries) = $crate::run::delivery_channel();
                let handle =
                    $crate::run::start($runtime()?, self.options, $crate::run::Listener::Stream(tx))?;
                Ok((PushConsumer { handle }, deliveries))
            }
        }

        /// A running push consumer. Call [`PushConsumer::shutdown`] to stop it gracefully and
        /// wait for it. Dropping it, in every adapter, asks for the same shutdown and returns at
        /// once: the shutdown completes in the background while the runtime lives (see
        /// `Handle::shutdown_in_background`).
        pub struct PushConsumer {
            handle: $crate::run::Handle,
        }

        impl ::std::fmt::Debug for PushConsumer {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct("PushConsumer").finish_non_exhaustive()
            }
        }

        impl PushConsumer {
            /// A builder for `group`.
            pub fn builder(group: impl Into<String>) -> Builder {
                Builder { options: $crate::ConsumerOptions::new(group), listener: None }
            }

            fn command(&self, c: $crate::__core::Command) {
                self.handle.command(c);
            }

            $crate::consumer_commands!();

            /// Counters since start (pulled, consumed OK and failed, sent back, timeouts, pull
            /// errors, flow-control delays); zeros once the consumer terminated.
            pub async fn stats(&self) -> $crate::__core::Stats {
                self.handle.snapshot().await.map(|s| s.stats).unwrap_or_default()
            }

            /// Every held queue: next and committed offsets, cached messages and bytes, the
            /// broker's max offset and the lag ([`QueueSnapshot::lag`](
            /// $crate::__core::QueueSnapshot::lag)) from the pull answers, orderly lock state.
            pub async fn queues(&self) -> Vec<$crate::__core::QueueSnapshot> {
                self.handle.snapshot().await.map(|s| s.queues).unwrap_or_default()
            }

            /// Rates per subscribed topic, as Java's ConsumerStatsManager keeps them: pull and
            /// consume TPS and RT over the last minute (sampled every 10 s), failures over the
            /// last hour; see [`TopicStats`]($crate::__core::TopicStats). Empty once the
            /// consumer terminated.
            pub async fn topics(&self) -> Vec<$crate::__core::TopicStats> {
                self.handle.snapshot().await.map(|s| s.topics).unwrap_or_default()
            }

            /// Move this consumer's queues of a topic (or one queue) to the first, the last, an
            /// offset or a time, as `mqadmin resetOffsetByTime` does a running Java consumer:
            /// what is cached is dropped, the target is committed and pulled from
            /// ([`Event::Seeked`]($crate::__core::Event::Seeked) per queue;
            /// [`Event::SeekFailed`]($crate::__core::Event::SeekFailed) if a broker lookup
            /// fails). Refused, moving nothing: a topic not subscribed, a queue not held, a
            /// negative or out-of-range offset, a time in the future
            /// ([`Command::Seek`]($crate::__core::Command::Seek) has the details).
            pub async fn seek(
                &self,
                queues: $crate::__core::QueueSelector,
                to: $crate::__core::SeekTo,
            ) -> Result<(), $crate::__core::UsageError> {
                self.handle.checked_command($crate::__core::Command::Seek { queues, to }).await
            }

            /// Graceful shutdown: stop pulling, let in-flight batches finish (up to
            /// `awaitTerminationMillisWhenShutdown`, 30 s by default), commit offsets,
            /// unregister.
            pub async fn shutdown(self) {
                self.handle.shutdown().await;
            }
        }

        impl Drop for PushConsumer {
            fn drop(&mut self) {
                self.handle.shutdown_in_background();
            }
        }
    };
}
