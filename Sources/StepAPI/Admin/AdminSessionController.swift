import Foundation
import HTTPTypes
import Hummingbird
import Logging
import StepCore
import StepStore

/// The console's sign-in under `/admin/session`: `POST` exchanges an operator credential (a named operator's
/// secret, or the bootstrap `admin.token`) for the session cookie, `GET` says who the cookie (or a bearer) signs
/// in, `DELETE` ends the session. Reachable without a prior credential (they authenticate what they are given),
/// but behind `SameOriginMiddleware` like every admin route, so another site's page cannot sign a browser in or
/// out.
struct AdminSessionController: Sendable {
    static let route = "/admin/session"

    let authenticator: AdminAuthenticator
    let cookie: AdminSessionCookie
    let sessionSeconds: Double
    let logger: Logger

    func register(in group: RouterGroup<AppRequestContext>, catalog: inout RouteCatalog) {
        group.on(.post, Self.route, catalog: &catalog) { request, context in
            try await signIn(request, address: AdminAuthenticator.address(context), requestId: context.requestId)
        }
        group.on(.get, Self.route, catalog: &catalog) { request, context in
            try await current(request, address: AdminAuthenticator.address(context), requestId: context.requestId)
        }
        group.on(.delete, Self.route, catalog: &catalog) { request, _ in
            try await signOut(request)
        }
    }

    /// A wrong credential counts against the address like a wrong bearer secret; a body that is not
    /// `{"credential": "…"}` is a 400 and counts nothing (it guessed nothing).
    private func signIn(_ request: Request, address: String, requestId: String) async throws -> Response {
        let now = authenticator.clock()
        try await authenticator.refuseLockedOut(address: address, now: now)
        let fields = try await AdminRequestBody.read(request).fields
        guard case .string(let credential) = fields["credential"], !credential.isEmpty else {
            throw AdminAPIError.badRequest("credential must be a non-empty string.")
        }
        let actor = try await authenticator.attempt(address: address, now: now, requestId: requestId) {
            try await authenticator.actor(secret: credential)
        }
        let value = OperatorAccounts.randomToken()
        let digest = OperatorSecret.digest(value)
        let expiresAt = now.addingTimeInterval(sessionSeconds)
        try await authenticator.store.transaction { tx in
            try await tx.createSession(
                digest: digest, actor: actor, credentialBinding: authenticator.credentialBinding(of: actor), at: now,
                expiresAt: expiresAt)
            try await tx.recordAudit(
                actor: actor, action: "operator.signin", target: actor.name, outcome: "signed_in", note: nil, at: now)
        }
        logger.adminAction(actor, action: "operator.signin", target: actor.name, outcome: "signed_in", note: nil)
        return Self.answer(
            actor, headers: [.setCookie: cookie.setting(value, maxAgeSeconds: Int(sessionSeconds.rounded(.down)))])
    }

    /// Who is signed in. A request that presents nothing is a plain 401 that counts nothing (the console asks this
    /// when it loads), and so is a cookie that names no live session; a wrong bearer secret counts like any failed
    /// attempt (`AdminAuthenticator.authenticate`).
    private func current(_ request: Request, address: String, requestId: String) async throws -> Response {
        let now = authenticator.clock()
        try await authenticator.refuseLockedOut(address: address, now: now)
        return Self.answer(
            try await authenticator.authenticate(request, address: address, now: now, requestId: requestId))
    }

    /// Ends the cookie's session, if it names one, and clears the cookie: 204 either way, so signing out twice is
    /// harmless.
    private func signOut(_ request: Request) async throws -> Response {
        let now = authenticator.clock()
        let digests = cookie.values(in: request).map(OperatorSecret.digest)
        if !digests.isEmpty {
            _ = try await authenticator.store.transaction { try await $0.endSessions(digests: digests, at: now) }
        }
        return Response(status: .noContent, headers: [.setCookie: cookie.clearing])
    }

    /// `{"operator": {"name", "role"}}`.
    static func answer(_ actor: AdminActor, headers: HTTPFields = [:]) -> Response {
        let body: JSONValue = .object([
            "operator": .object(["name": .string(actor.name), "role": .string(actor.role.rawValue)])
        ])
        return .json(status: .ok, body: (try? JSONCoding.encode(body)) ?? "{}", headers: headers)
    }
}
