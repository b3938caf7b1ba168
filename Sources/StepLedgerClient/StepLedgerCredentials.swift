/// What the client asks the app for on every request: the walker's session token and, in production, a fresh
/// Firebase App Check token.
///
/// The client never stores either token and asks again for each request. A provider may cache the session token
/// until it expires; not the App Check token: the server takes one only within five minutes of its minting
/// (`APP_CHECK_STALE` after that), so hand out a limited-use token (`getLimitedUseToken()`) or one refreshed
/// within that time, never a cached hour-long one.
public protocol StepLedgerCredentials: Sendable {
    /// The walker's session JWT. `refresh` is `true` after the server answered 401 to the last token the provider
    /// gave: the provider should then get a new one from the app's sign-in service rather than return its cache.
    func sessionToken(refresh: Bool) async throws -> String

    /// A Firebase App Check token minted within the last five minutes, or `nil` where the server does not ask for
    /// one (a test-phase server ignores it).
    func appCheckToken() async throws -> String?
}

extension StepLedgerCredentials {
    public func appCheckToken() async throws -> String? { nil }
}

/// Credentials from two closures, for apps that do not want a type of their own.
public struct ClosureCredentials: StepLedgerCredentials {
    private let session: @Sendable (Bool) async throws -> String
    private let appCheck: @Sendable () async throws -> String?

    public init(
        sessionToken: @escaping @Sendable (_ refresh: Bool) async throws -> String,
        appCheckToken: @escaping @Sendable () async throws -> String? = { nil }
    ) {
        self.session = sessionToken
        self.appCheck = appCheckToken
    }

    public func sessionToken(refresh: Bool) async throws -> String { try await session(refresh) }
    public func appCheckToken() async throws -> String? { try await appCheck() }
}
