import Foundation
import Hummingbird
import StepCore
import StepStore

/// `GET /admin/metrics`: the review desk's figures as JSON, the same snapshot `/metrics` renders for Prometheus.
struct AdminMetricsController: Sendable {
    static let route = "/admin/metrics"

    let store: Store
    let clock: @Sendable () -> Date

    func register(in group: RouterGroup<AppRequestContext>, catalog: inout RouteCatalog) {
        group.on(.get, Self.route, catalog: &catalog) { _, context in
            _ = try context.requireAdmin(.read)
            let now = clock()
            let snapshot = try await store.withoutTransaction { try await $0.adminMetrics(now: now) }
            return AdminController.json(.ok, Self.body(snapshot))
        }
    }

    static func body(_ snapshot: AdminMetricsSnapshot) -> JSONValue {
        func seconds(_ value: Double?) -> JSONValue { value.map { .int(Int($0.rounded(.down))) } ?? .null }
        var open: [String: JSONValue] = [:]
        var oldest: [String: JSONValue] = [:]
        for kind in ReviewKind.allCases {
            open[kind.rawValue] = .int(snapshot.openReviews[kind] ?? 0)
            oldest[kind.rawValue] = seconds(snapshot.oldestOpenAgeSeconds[kind])
        }
        return .object([
            "reviews": .object(["open": .object(open), "oldestOpenAgeSeconds": .object(oldest)]),
            "jobs": .object([
                "byState": .object(snapshot.jobsByState.mapValues { .int($0) }),
                "oldestRunnableAgeSeconds": seconds(snapshot.oldestRunnableAgeSeconds),
            ]),
            "decisions": .array(
                snapshot.decisions.map {
                    .object([
                        "operator": .string($0.operatorName), "outcome": .string($0.outcome), "count": .int($0.count),
                    ])
                }),
        ])
    }
}
