import Foundation
import Hummingbird

/// The operators' console at `/admin/`: one page, its script and its style sheet, compiled into the binary
/// (`ConsoleSources`, generated from `Console/Assets/` by scripts/embed-console-assets). Served without
/// authentication — the page holds nothing secret and signs in through `POST /admin/session` — but only while the
/// admin API is on; otherwise 404 like every `/admin/` route. GET only: the page changes nothing itself.
struct ConsoleController: Sendable {
    static let pageRoute = "/admin/"
    static let scriptRoute = "/admin/assets/console.js"
    static let styleSheetRoute = "/admin/assets/console.css"

    static let script = ConsoleAsset(
        route: scriptRoute, contentType: "text/javascript; charset=utf-8", text: ConsoleSources.script,
        caching: .immutableWhenVersioned)
    static let styleSheet = ConsoleAsset(
        route: styleSheetRoute, contentType: "text/css; charset=utf-8", text: ConsoleSources.styleSheet,
        caching: .immutableWhenVersioned)
    /// The page links the script and style sheet by version, so a browser keeps them until the build changes.
    static let page = ConsoleAsset(
        route: pageRoute, contentType: "text/html; charset=utf-8",
        text: ConsoleSources.html
            .replacingOccurrences(of: "\"\(scriptRoute)\"", with: "\"\(script.versionedURL)\"")
            .replacingOccurrences(of: "\"\(styleSheetRoute)\"", with: "\"\(styleSheet.versionedURL)\""),
        caching: .revalidate)

    static let assets = [page, script, styleSheet]

    func register(in group: RouterGroup<AppRequestContext>, catalog: inout RouteCatalog) {
        for asset in Self.assets {
            group.on(.get, asset.route, catalog: &catalog) { request, _ in
                asset.response(to: request)
            }
        }
    }
}
