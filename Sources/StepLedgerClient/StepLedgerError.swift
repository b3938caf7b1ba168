import Foundation

/// Why a call of ``StepLedgerClient`` failed.
///
/// New cases may come in later versions: switch over it with a `default`.
public enum StepLedgerError: Error, Sendable, Hashable {
    /// ``StepLedgerClient/record(day:count:source:timeZone:sampleStart:sampleEnd:sourceBundleId:gyroSamplesObserved:)``
    /// refused the bucket before storing it; the text says which field.
    case invalidBucket(String)
    /// The offline queue holds its configured maximum of buckets; nothing was stored.
    case queueFull(limit: Int)
    /// The queue's folder cannot be read or written, or another client holds it.
    case storeUnavailable(String)
    /// The session token is another walker's than the one the store folder belongs to (`Configuration.walkerId`,
    /// or the `sub` of the token its first request carried), or the folder opened is another walker's: nothing was sent, and the folder's buckets stay queued for their own
    /// walker. Give each walker who signs in on the phone a folder of their own (``StepLedgerClient/Configuration/storeDirectory``).
    case storeBelongsToAnotherWalker
    /// 422 `STEP_REJECTED`: the server's anti-cheat checks refused the bucket, with seed 000's reason codes.
    case rejected(reasons: [String])
    /// 403 `STEP_SOURCE_NOT_WHITELISTED`: the server does not take steps from this source bundle.
    case sourceNotWhitelisted(sourceBundleId: String)
    /// 403 `WALKER_SUSPENDED`: an operator suspended the walker. A flush keeps the buckets and pauses the queue
    /// (``RetryPolicy/suspendedPause``); they go once the walker is reinstated.
    case walkerSuspended
    /// 422 `IDEMPOTENCY_KEY_REUSED`: a key came back with another body (the client never does this itself).
    case idempotencyKeyReused
    /// 422 `INSUFFICIENT_ENERGY` for an allocation.
    case insufficientEnergy(required: Int, spendable: Int)
    /// 400: the server found the request malformed; the message names the field.
    case invalidRequest(String)
    /// 429: the walker's rate limit is used up; the queue sends nothing before `retryAfter` seconds have passed (60
    /// when the answer named no wait).
    case rateLimited(retryAfter: TimeInterval)
    /// 401 after a refreshed session token too; `reason` is the server's `details.reason` when it gave one. A reason
    /// that starts with `APP_CHECK_` is about the App Check token, asked for again once: the session is fine, and
    /// the App Check provider must hand out tokens minted within five minutes (a limited-use token).
    case unauthorized(reason: String?)
    /// 401 "Attestation verification failed" for a health submission, after one fresh attestation.
    case attestationFailed
    /// 503 or a gateway failure; worth trying again after `retryAfter` seconds when the server said so.
    case serverUnavailable(retryAfter: TimeInterval?)
    /// Any other answer the client does not expect.
    case unexpectedResponse(status: Int, code: String?)
    /// The request did not reach the server or its answer did not come back.
    case transport(String)
    /// Every try of an allocation met no answer or a 5xx: the server may have
    /// made it. Call ``StepLedgerClient/allocate(kind:nodeId:points:attempts:idempotencyKey:)`` again with this
    /// `idempotencyKey` to learn the outcome; the walker is charged once whatever happened. `lastError` is what
    /// the last try met.
    indirect case allocationUnanswered(idempotencyKey: String, lastError: StepLedgerError)
    /// The server will not take an answer to this re-read request: `REREAD_NOT_FOUND` (no such request for the
    /// walker), `REREAD_ALREADY_ANSWERED` (answered under another key, or under this one longer ago than the server
    /// keeps answers for their keys: its nonce is one-time), `REREAD_EXPIRED` (past its deadline, or the day was
    /// decided another way first) or `REREAD_NONCE_MISMATCH`. Read the day with
    /// ``StepLedgerClient/days(from:to:)`` to see how it was decided.
    case rereadRefused(code: String)
    /// A try of a re-read answer met no answer, a 5xx or a 409 `IDEMPOTENCY_IN_FLIGHT`, and no later try was
    /// answered about the key (the tries ran out, or a 429, 401, 403 or cancellation ended them): the server may
    /// have taken it. Call ``StepLedgerClient/answerReread(_:readings:sampleDigest:attempts:idempotencyKey:)`` again
    /// with the same readings and this `idempotencyKey` to learn the outcome. `lastError` is what the last try met.
    indirect case rereadUnanswered(idempotencyKey: String, lastError: StepLedgerError)
}
