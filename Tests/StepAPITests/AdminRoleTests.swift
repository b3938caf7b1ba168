import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import StepAPI
import StepCore
import StepDatabase
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// Every admin route against every role, from the permission openapi.yaml gives it: each operation under `/admin/`
/// carries `x-permission: read | decide | bulkDecide | manageJobs | none` (none: the sign-in routes, which
/// authenticate what they are given). A role without the permission gets 403 FORBIDDEN naming exactly that
/// permission, before anything else about the request is looked at; a role with it never does. A new admin route
/// without the line fails here: add it to the operation in openapi.yaml (the contract fuzzing reads the same line).
@Suite("Admin API: every route × every role")
struct AdminRoleTests {
    /// `"METHOD /path"` → the `x-permission` of its operation in openapi.yaml.
    static func documentedPermissions(_ yaml: String) -> [String: String] {
        var permissions: [String: String] = [:]
        var path: String?
        var method: String?
        for line in yaml.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("components:") { break }
            if line.hasPrefix("  /"), line.hasSuffix(":") {
                path = String(line.dropFirst(2).dropLast())
                method = nil
            } else if line.hasPrefix("    "), !line.hasPrefix("     "), line.hasSuffix(":") {
                method = String(line.dropFirst(4).dropLast()).uppercased()
            } else if line.hasPrefix("      x-permission:"), let path, let method {
                permissions["\(method) \(path)"] = line.dropFirst("      x-permission:".count)
                    .trimmingCharacters(in: .whitespaces)
            }
        }
        return permissions
    }

    /// The route's path with each `{parameter}` filled by a value that names nothing.
    static func concrete(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: false).map {
            $0.hasPrefix("{") ? "no-such-thing" : String($0)
        }.joined(separator: "/")
    }

    @Test("each admin route answers each role by the permission openapi.yaml documents", arguments: TestDatabases.kinds)
    func everyRouteEveryRole(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind) { $0.adminMaxFailuresPerMinute = 1_000 }
        let documented = Self.documentedPermissions(try String(contentsOf: AccessTests.openAPIFile, encoding: .utf8))
        let routes = harness.app.routes.entries.filter { $0.path.hasPrefix("/admin/") }.sorted()
        #expect(!routes.isEmpty)
        var made: [OperatorRole: String] = [:]
        for role in OperatorRole.allCases {
            made[role] = try await OperatorSessionTests.created(harness, name: "role-\(role.rawValue)", role: role)
        }
        let secrets = made
        try await harness.run { client in
            for route in routes {
                let label = route.description
                guard let text = documented[label] else {
                    Issue.record(
                        "\(label) has no x-permission in openapi.yaml (read, decide, bulkDecide, manageJobs or none)")
                    continue
                }
                if text == "none" { continue }
                guard let permission = AdminPermission(rawValue: text) else {
                    Issue.record("\(label): x-permission \(text) is not a permission")
                    continue
                }
                let method = HTTPRequest.Method(route.method.uppercased())!
                let uri = Self.concrete(route.path)
                let body = method == .get ? nil : ByteBuffer(string: "{}")
                let anonymous = try await client.admin(uri, method: method, token: nil, body: body)
                #expect(anonymous.status == .unauthorized, "\(label) without a credential")
                for role in OperatorRole.allCases {
                    let response = try await client.admin(uri, method: method, token: secrets[role], body: body)
                    let refused = response.status == .forbidden && (try? response.json["error"]) == .string("FORBIDDEN")
                    #expect(refused == !role.permits(permission), "\(label) as \(role): \(response.text.prefix(200))")
                    if refused {
                        #expect(try response.json["details"]?["required"] == .string(permission.rawValue), "\(label)")
                        #expect(try response.json["details"]?["role"] == .string(role.rawValue), "\(label)")
                    }
                }
            }
        }
        // Issue 26's "done when", stated over the whole surface: a viewer cannot decide (every state-changing
        // route needs more than read), and a reviewer cannot touch jobs (every state change under /admin/jobs
        // needs manageJobs).
        for route in routes where route.method != "get" {
            let permission = documented[route.description]
            guard permission != "none" else { continue }
            #expect(permission != "read", "\(route) changes state with only read")
            if route.path.hasPrefix("/admin/jobs") {
                #expect(permission == "manageJobs", "\(route) touches jobs without manageJobs")
            }
        }
    }
}
