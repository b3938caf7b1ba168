/// The platform whose attestation a health submission carries (seed 002).
public enum HealthPlatform: String, Sendable, Hashable {
    /// App Attest: an attestation object for a new key, an assertion for a registered one.
    case ios
    /// Play Integrity: a token requested with the nonce.
    case android
}

/// What an ``Attestor`` produced for one nonce.
public struct DeviceAttestation: Sendable, Hashable {
    /// iOS: base64 of an App Attest attestation object or assertion; Android: the Play Integrity token.
    public var token: String
    /// iOS assertions: base64 of the key id, so the server looks up the key at once.
    public var keyId: String?

    public init(token: String, keyId: String? = nil) {
        self.token = token
        self.keyId = keyId
    }
}

/// Proves that a health submission comes from the genuine app on a genuine device, for one server nonce.
///
/// The clientDataHash the server checks is SHA-256 of the nonce's UTF-8 text. On iOS use ``AppAttestAttestor``.
/// An Android app built with the Kotlin client implements the same two calls over Play Integrity: `attest` asks
/// `IntegrityManager.requestIntegrityToken` with the nonce and returns the token; `reset` has nothing to forget.
public protocol Attestor: Sendable {
    var platform: HealthPlatform { get }

    /// Evidence bound to `nonce`: an attestation of a new key the first time, an assertion of that key after.
    func attest(nonce: String) async throws -> DeviceAttestation

    /// The server refused the last evidence (a key restored from a backup onto another device, a key the server
    /// never registered): forget the key, so the next ``attest(nonce:)`` attests a new one.
    func reset() async
}

/// A day's health totals (seed 002's `POST /health` body, without the proof).
public struct HealthTotals: Sendable, Hashable {
    /// The day they are for; the server takes today in the walker's zone when nil.
    public var date: CalendarDay?
    public var steps: Int
    /// Seconds.
    public var duration: Double
    /// Kilocalories.
    public var calories: Double
    /// Metres.
    public var distance: Double
    /// Where the totals came from, e.g. `healthkit`.
    public var source: String

    public init(date: CalendarDay?, steps: Int, duration: Double, calories: Double, distance: Double, source: String) {
        self.date = date
        self.steps = steps
        self.duration = duration
        self.calories = calories
        self.distance = distance
        self.source = source
    }
}

/// The stored record of a health submission.
public struct HealthRecord: Sendable, Hashable {
    public var id: String
    public var date: CalendarDay
    public var steps: Int
    public var duration: Double
    public var calories: Double
    public var distance: Double
    public var source: String
}
