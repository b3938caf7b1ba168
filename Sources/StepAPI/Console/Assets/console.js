/* StepLedger review desk: the operators' console (issue 26).

   Vanilla JavaScript, no framework and no request but to this server's JSON routes under /admin/. The page's CSP
   allows only this file and console.css: no inline script, no inline style, no `on…` attribute; every handler is
   added with addEventListener and every text is set with textContent, never parsed as HTML.

   The credential is read from the sign-in field, sent once in the body of POST /admin/session and forgotten: the
   session is the HttpOnly cookie that answer sets. Nothing is kept in the browser's web storage, and the
   credential never goes into a URL. Views and their filters live in the URL's hash (#/queue?status=open&…), so a
   reload or a shared link shows the same thing. */
(function () {
  "use strict";

  const REFRESH_MS = 3000;
  const BULK_CHUNK = 100;
  const ADVANCE_PAGES = 5;
  const PERMISSIONS = {
    viewer: ["read"],
    reviewer: ["read", "decide"],
    operator: ["read", "decide", "bulkDecide", "manageJobs"],
  };
  const QUEUE_KEYS = ["status", "kind", "reason", "walker", "from", "to", "order", "limit", "cursor"];
  const JOB_KEYS = ["state", "kind", "limit", "cursor"];
  const AUDIT_KEYS = ["operator", "action", "limit", "cursor"];
  const AUDIT_ACTIONS = [
    "review.claim", "review.release", "review.accept", "review.reject", "day.reverse", "walker.suspend",
    "walker.reinstate", "walker.erase", "job.retry", "job.discard", "operator.signin", "operator.create",
    "operator.revoke",
  ];

  const state = {
    me: null, // {name, role}
    route: { view: "queue", id: null, params: new URLSearchParams() },
    generation: 0, // bumped by every navigation, so a late answer never paints over another view
    flash: null, // {notice} or {error} shown once the next view is painted
    queue: { items: [], nextCursor: null, selected: 0, checked: new Set(), key: "" },
    jobs: { items: [], nextCursor: null, checked: new Set() },
    detail: null, // {entry, evidence, walker, account}
    busy: false, // a decision is on its way: keys wait for it
    refreshing: false,
    timer: null,
    // The server's clock less this browser's, from the Date of its last answer (to the second). A claim's end is
    // the server's time: read against a browser clock minutes fast, a live claim would pass for a lapsed one (the
    // entries passed over never given back), and against one slow, a lapsed claim for a live one.
    clockOffset: 0,
  };

  /** Now by the server's clock, as far as its last answer tells. */
  function serverNow() {
    return Date.now() + state.clockOffset;
  }

  const $ = (id) => document.getElementById(id);

  // ---------------------------------------------------------------------------------------------------------------
  // DOM helpers

  /** An element: props set attributes (or properties for booleans), `on…` props add listeners. */
  function h(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = String(value);
      else if (key === "class") node.className = value;
      else if (key === "test") node.dataset.test = value;
      else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
      else if (typeof value === "boolean") node[key] = value;
      else node.setAttribute(key, String(value));
    }
    append(node, children);
    return node;
  }

  /**
   * Runs `paint`, which replaces nodes, and gives the keyboard focus back to the control that had it, found again
   * in the new nodes by its id or by its data-test and data-id: a live refresh must not throw a keyboard user's
   * place away. When the control is gone or now disabled, the focus stays where the browser left it.
   */
  function keepingFocus(paint) {
    const active = document.activeElement;
    const key = active instanceof HTMLElement && active !== document.body ? focusKey(active) : null;
    paint();
    if (!key || active.isConnected) return;
    const again = key.id ? document.getElementById(key.id) : document.querySelector(key.selector);
    if (again instanceof HTMLElement && !again.disabled) again.focus({ preventScroll: true });
  }

  function focusKey(node) {
    if (node.id) return { id: node.id };
    if (!node.dataset.test) return null;
    let selector = `[data-test="${CSS.escape(node.dataset.test)}"]`;
    if (node.dataset.id) selector += `[data-id="${CSS.escape(node.dataset.id)}"]`;
    return { selector };
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
  }

  const SVG_NS = "http://www.w3.org/2000/svg";

  /** An SVG element made with the DOM (the chart), attributes only. */
  function svg(tag, attributes, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attributes || {})) {
      if (value !== null && value !== undefined) node.setAttribute(key, String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function field(label, control) {
    return h("label", {}, label, control);
  }

  function textInput(id, value, placeholder) {
    return h("input", { type: "text", id, name: id, test: id, value: value || "", placeholder: placeholder || "",
      autocomplete: "off", spellcheck: "false" });
  }

  function choice(id, options, selected) {
    return h("select", { id, name: id, test: id },
      options.map(([value, label]) => h("option", { value, selected: value === selected }, label)));
  }

  function panel(title, test, ...children) {
    return h("section", { class: "panel", test, id: test }, h("h2", {}, title), children);
  }

  function table(test, headings, rows, emptyText) {
    return h("table", { class: "grid", test },
      h("thead", {}, h("tr", {}, headings.map((heading) =>
        h("th", { class: heading.endsWith("#") ? "number" : null }, heading.replace(/#$/, ""))))),
      h("tbody", {}, rows.length ? rows
        : h("tr", {}, h("td", { colspan: String(headings.length), class: "empty" }, emptyText || "None."))));
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Formatting

  const integer = new Intl.NumberFormat("en-US");

  function number(value) {
    return typeof value === "number" ? integer.format(value) : "—";
  }

  /** A UTC instant to the second, or to the millisecond with `precise` when it has any (a day's submissions:
   *  two that arrived a millisecond apart, or spans that overlap by a fraction of a second, must not read alike). */
  function instant(text, precise = false) {
    if (!text) return "—";
    const date = new Date(text);
    if (Number.isNaN(date.getTime())) return text;
    const iso = date.toISOString().replace("T", " ");
    return precise && date.getUTCMilliseconds() ? iso : iso.replace(/\.\d+Z$/, "Z");
  }

  /** The UTC time of day, to the second, or to the millisecond with `precise` when it has any. */
  function clock(text, precise = false) {
    const date = new Date(text);
    if (Number.isNaN(date.getTime())) return "";
    return date.toISOString().slice(11, precise && date.getUTCMilliseconds() ? 23 : 19);
  }

  function duration(seconds) {
    if (typeof seconds !== "number") return "—";
    if (seconds < 90) return `${Math.round(seconds)} s`;
    if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
    if (seconds < 172800) return `${Math.round(seconds / 3600)} h`;
    return `${Math.round(seconds / 86400)} d`;
  }

  function age(text) {
    const at = Date.parse(text);
    return Number.isNaN(at) ? "—" : duration(Math.max(0, (serverNow() - at) / 1000));
  }

  function plural(count, one, many) {
    return `${count} ${count === 1 ? one : many}`;
  }

  function tags(values, kind) {
    return (values || []).map((value) => h("span", { class: `tag ${kind || ""}` }, value));
  }

  function status(value) {
    return value ? h("span", { class: `status-${value}` }, value) : "—";
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Requests

  class APIError extends Error {
    constructor(status, code, message, details) {
      super(message);
      this.status = status;
      this.code = code;
      this.details = details || {};
    }
  }

  /** One JSON request to this server; a non-2xx answer throws an APIError carrying the server's envelope. */
  // URLSearchParams writes a space as "+", which the server reads as a plus (a query is not a form there): send it
  // as "%20". A "+" of the value itself was written "%2B", and an id from enc() has neither.
  function wire(path) {
    const mark = path.indexOf("?");
    return mark < 0 ? path : path.slice(0, mark + 1) + path.slice(mark + 1).replace(/\+/g, "%20");
  }

  async function api(method, path, body) {
    const init = { method, credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json" } };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(wire(path), init);
    } catch (error) {
      throw new APIError(0, "NETWORK", `The server did not answer (${error.message}).`);
    }
    const served = Date.parse(response.headers.get("Date") || "");
    if (!Number.isNaN(served)) state.clockOffset = served - Date.now();
    const text = response.status === 204 ? "" : await response.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch (_) {
        data = null;
      }
    }
    if (!response.ok) {
      const envelope = data && typeof data === "object" ? data : {};
      const error = new APIError(response.status, envelope.error || `HTTP_${response.status}`,
        envelope.message || response.statusText || "The request failed.", envelope.details);
      if (response.status === 401 && path !== "/admin/session" && state.me) {
        showSignIn();
        showError(new APIError(401, "UNAUTHORIZED", "The session ended; sign in again."));
      }
      throw error;
    }
    return data;
  }

  function enc(value) {
    return encodeURIComponent(value);
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Banner, notice, permissions

  function describe(error) {
    if (!(error instanceof APIError)) return String((error && error.message) || error);
    const parts = [error.message];
    const details = error.details || {};
    if (error.code === "CLAIMED" && details.operator) {
      parts.push(`Held by ${details.operator} until ${instant(details.until)}.`);
    }
    if (error.code === "FORBIDDEN" && details.required) {
      parts.push(`Needs ${details.required}; your role is ${details.role || state.me?.role}.`);
    }
    return `${parts.join(" ")} (${error.code}${error.status ? `, HTTP ${error.status}` : ""})`;
  }

  function showError(error) {
    if (error instanceof APIError && error.status === 401 && !state.me && error.code !== "UNAUTHORIZED") return;
    $("banner-text").textContent = describe(error);
    $("banner").hidden = false;
  }

  function clearError() {
    $("banner").hidden = true;
    $("banner-text").textContent = "";
  }

  function notify(text) {
    $("notice").textContent = text || "";
    $("notice").hidden = !text;
  }

  function can(permission) {
    return Boolean(state.me && (PERMISSIONS[state.me.role] || []).includes(permission));
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Session

  async function boot() {
    wireStaticControls();
    try {
      const data = await api("GET", "/admin/session");
      signedIn(data.operator);
    } catch (error) {
      showSignIn();
      if (error.status !== 401) showError(error);
    }
  }

  function showSignIn() {
    state.me = null;
    state.generation += 1;
    stopRefresh();
    closeDialogs();
    $("view").replaceChildren();
    $("nav").hidden = true;
    $("whoami").hidden = true;
    $("sign-out").hidden = true;
    $("refresh-state").hidden = true;
    $("sign-in").hidden = false;
    $("credential").focus();
  }

  function signedIn(operator) {
    state.me = { name: operator.name, role: operator.role };
    $("sign-in").hidden = true;
    $("nav").hidden = false;
    $("operator-name").textContent = operator.name;
    $("operator-role").textContent = operator.role;
    $("whoami").hidden = false;
    $("sign-out").hidden = false;
    startRefresh();
    route();
  }

  /**
   * The browser holds one session cookie for all its tabs: signing in as someone else in another tab changes who
   * this page acts as, and signing out there ends this page's session. Checked when the page comes back into view,
   * before anything can be done on it: the header, the claims and the buttons follow the operator the server sees.
   */
  async function recheckSession() {
    if (!state.me || document.hidden || state.rechecking) return;
    state.rechecking = true;
    let operator;
    try {
      operator = (await api("GET", "/admin/session")).operator;
    } catch (error) {
      if (error.status === 401 && state.me) {
        showSignIn();
        showError(new APIError(401, "UNAUTHORIZED", "The session ended (signed out in another tab?); sign in again."));
      }
      return;
    } finally {
      state.rechecking = false;
    }
    if (!state.me || (operator.name === state.me.name && operator.role === state.me.role)) return;
    signedIn(operator);
    notify(`Signed in as ${operator.name} in another tab: this page now acts as ${operator.name} (${operator.role}).`);
  }

  async function signIn(event) {
    event.preventDefault();
    const input = $("credential");
    const body = { credential: input.value };
    input.value = "";
    clearError();
    notify("");
    try {
      const data = await api("POST", "/admin/session", body);
      signedIn(data.operator);
    } catch (error) {
      showError(error);
      input.focus();
    } finally {
      body.credential = "";
    }
  }

  async function signOut() {
    // The entry open on the page is given back first, as leaving it would: the session ends, and the claim would
    // otherwise hold colleagues off it until it expires.
    const detail = state.detail;
    const released = heldByMe(detail)
      && await api("POST", `/admin/reviews/${enc(detail.entry.id)}/release`).then(() => true, () => false);
    try {
      await api("DELETE", "/admin/session");
    } catch (error) {
      // Not ended (the server or the network failed): the session still works, so the page says so and stays. A
      // 401 means it had ended already.
      if (error.status !== 401) {
        showError(new APIError(error.status, error.code, `Not signed out: ${error.message} Try again.`));
        if (released) reloadDetail();
        return;
      }
    }
    showSignIn();
    history.replaceState(null, "", location.pathname);
    notify("Signed out.");
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Routing: #/queue?filters, #/review/ID?queue-filters, #/jobs?filters, #/metrics, #/audit?filters

  function parseRoute() {
    const raw = location.hash.replace(/^#\/?/, "");
    const mark = raw.indexOf("?");
    const path = mark < 0 ? raw : raw.slice(0, mark);
    const params = new URLSearchParams(mark < 0 ? "" : raw.slice(mark + 1));
    const [view, ...rest] = path.split("/");
    return { view: view || "queue", id: rest.length ? decodeURIComponent(rest.join("/")) : null, params };
  }

  function only(params, keys) {
    const out = new URLSearchParams();
    for (const key of keys) {
      const value = params.get(key);
      if (value) out.set(key, value);
    }
    return out;
  }

  function link(view, id, params) {
    const query = params ? params.toString() : "";
    return `#/${view}${id ? `/${enc(id)}` : ""}${query ? `?${query}` : ""}`;
  }

  function navigate(view, id, params) {
    const target = link(view, id, params);
    if (location.hash === target) route();
    else location.hash = target;
  }

  function route() {
    if (!state.me) return;
    state.generation += 1;
    const left = state.detail;
    state.route = parseRoute();
    releaseLeft(left, state.route);
    state.detail = null;
    clearError();
    notify("");
    if (state.flash) {
      if (state.flash.error) showError(state.flash.error);
      if (state.flash.notice) notify(state.flash.notice);
      state.flash = null;
    }
    const view = state.route.view;
    for (const anchor of document.querySelectorAll("#nav a")) {
      const current = anchor.dataset.view === view || (view === "review" && anchor.dataset.view === "queue");
      anchor.classList.toggle("current", current);
    }
    if (view === "queue") renderQueue();
    else if (view === "review" && state.route.id) renderDetail(state.route.id);
    else if (view === "jobs") renderJobs();
    else if (view === "metrics") renderMetrics();
    else if (view === "audit") renderAudit();
    else navigate("queue");
    updateRefreshState();
  }

  // ---------------------------------------------------------------------------------------------------------------
  // The queue

  function queueParams() {
    return only(state.route.params, QUEUE_KEYS);
  }

  function renderQueue() {
    const params = state.route.params;
    const form = h("form", { class: "filters", id: "queue-filters", test: "queue-filters", onsubmit: applyQueueFilters },
      field("Status", choice("filter-status", [["open", "open"], ["resolved", "resolved"], ["all", "all"]],
        params.get("status") || "open")),
      field("Kind", choice("filter-kind", [["", "any"], ["quarantined_day", "quarantined day"],
        ["repeated_rejections", "repeated rejections"]], params.get("kind") || "")),
      field("Reason", textInput("filter-reason", params.get("reason"), "reason code")),
      field("Walker", textInput("filter-walker", params.get("walker"), "walker id")),
      field("From day", textInput("filter-from", params.get("from"), "YYYY-MM-DD")),
      field("To day", textInput("filter-to", params.get("to"), "YYYY-MM-DD")),
      field("Order", choice("filter-order", [["age", "oldest first"], ["stake", "most Energy at stake"]],
        params.get("order") || "age")),
      field("Per page", choice("filter-limit", [["25", "25"], ["50", "50"], ["100", "100"], ["200", "200"]],
        params.get("limit") || "50")),
      h("button", { type: "submit", class: "primary", id: "apply-filters", test: "apply-filters" }, "Apply"),
      h("button", { type: "button", id: "clear-filters", test: "clear-filters", onclick: () => navigate("queue") },
        "Clear"));
    const bulkAllowed = can("bulkDecide");
    const toolbar = h("div", { class: "toolbar" },
      h("span", { class: "count", id: "selected-count", test: "selected-count" }, "0 selected"),
      h("button", { type: "button", class: "accept", id: "bulk-accept", test: "bulk-accept", disabled: true,
        title: bulkAllowed ? "Accept every ticked entry" : "Your role may not decide in bulk",
        onclick: () => bulkDecide("accept") }, "Accept selected"),
      h("button", { type: "button", class: "reject", id: "bulk-reject", test: "bulk-reject", disabled: true,
        title: bulkAllowed ? "Reject every ticked entry" : "Your role may not decide in bulk",
        onclick: () => bulkDecide("reject") }, "Reject selected"),
      h("span", { class: "count", id: "queue-summary", test: "queue-summary" }));
    const grid = h("table", { class: "grid", id: "queue-table", test: "queue-table" },
      h("thead", {}, h("tr", {},
        h("th", {}, h("input", { type: "checkbox", id: "select-all", test: "select-all",
          "aria-label": "Tick every entry of this page", onchange: (event) => tickAll(event.target.checked) })),
        ["Walker", "Kind", "Day", "Reasons"].map((text) => h("th", {}, text)),
        h("th", { class: "number" }, "At stake"),
        ["Opened", "Claim", "Status"].map((text) => h("th", {}, text)))),
      h("tbody", { id: "queue-body", test: "queue-body" }));
    const pager = h("div", { class: "pager" },
      h("button", { type: "button", id: "first-page", test: "first-page", disabled: true,
        onclick: () => { const next = queueParams(); next.delete("cursor"); navigate("queue", null, next); } },
      "First page"),
      h("button", { type: "button", id: "next-page", test: "next-page", disabled: true, onclick: nextQueuePage },
        "Next page"));
    const key = queueParams();
    key.delete("cursor");
    if (state.queue.key !== key.toString()) {
      state.queue.items = [];
      state.queue.nextCursor = null;
      state.queue.checked.clear();
      state.queue.selected = 0;
      state.queue.key = key.toString();
    }
    $("view").replaceChildren(h("h1", {}, "Review queue"), form, toolbar, grid, pager);
    paintQueue();
    loadQueue();
  }

  function applyQueueFilters(event) {
    event.preventDefault();
    const next = new URLSearchParams();
    const values = {
      status: $("filter-status").value, kind: $("filter-kind").value, reason: $("filter-reason").value.trim(),
      walker: $("filter-walker").value.trim(), from: $("filter-from").value.trim(), to: $("filter-to").value.trim(),
      order: $("filter-order").value, limit: $("filter-limit").value,
    };
    for (const [key, value] of Object.entries(values)) {
      const isDefault = (key === "status" && value === "open") || (key === "order" && value === "age")
        || (key === "limit" && value === "50");
      if (value && !isDefault) next.set(key, value);
    }
    navigate("queue", null, next);
  }

  function nextQueuePage() {
    if (!state.queue.nextCursor) return;
    const next = queueParams();
    next.set("cursor", state.queue.nextCursor);
    navigate("queue", null, next);
  }

  async function loadQueue() {
    const generation = state.generation;
    try {
      const data = await api("GET", `/admin/reviews?${queueParams()}`);
      if (generation !== state.generation) return;
      takeQueue(data);
      keepingFocus(paintQueue);
    } catch (error) {
      if (generation === state.generation) showError(error);
    }
  }

  function takeQueue(data) {
    const previous = state.queue.items[state.queue.selected];
    const items = Array.isArray(data.items) ? data.items : [];
    state.queue.items = items;
    state.queue.nextCursor = data.nextCursor || null;
    const present = new Set(items.map((entry) => entry.id));
    for (const id of [...state.queue.checked]) if (!present.has(id)) state.queue.checked.delete(id);
    const kept = previous ? items.findIndex((entry) => entry.id === previous.id) : -1;
    state.queue.selected = kept >= 0 ? kept : Math.max(0, Math.min(state.queue.selected, items.length - 1));
  }

  function claimedByOther(entry) {
    const claim = entry && entry.claim;
    return Boolean(claim && state.me && claim.operator !== state.me.name && Date.parse(claim.until) > serverNow());
  }

  function claimText(claim) {
    if (!claim) return "—";
    const mine = state.me && claim.operator === state.me.name;
    return h("span", { class: mine ? "claim-mine" : "claim-other" },
      `${mine ? "you" : claim.operator} until ${clock(claim.until)}`);
  }

  /** A resolved entry's status in one word: accepted, rejected, or closed (no decision: the walker was erased). */
  function resolvedAs(entry) {
    return entry.decision === "accept" ? "accepted" : entry.decision === "reject" ? "rejected" : "closed";
  }

  /** How a resolved entry ended: the decision and who made it, or closed by the walker's erasure. */
  function resolution(entry) {
    if (!entry.decision) return "closed without a decision (the walker was erased)";
    return `resolved: ${entry.decision} by ${entry.decidedBy || "—"}`;
  }

  function paintQueue() {
    const body = $("queue-body");
    if (!body) return;
    const items = state.queue.items;
    const rows = items.map((entry, index) => h("tr", {
      class: `row${index === state.queue.selected ? " selected" : ""}`, test: "queue-row", "data-id": entry.id,
      "aria-selected": String(index === state.queue.selected),
      onclick: (event) => { if (!event.target.closest("input")) openEntry(entry.id); },
    },
    h("td", {}, h("input", { type: "checkbox", class: "pick", test: "pick", "data-id": entry.id,
      checked: state.queue.checked.has(entry.id), "aria-label": `Tick ${entry.walkerId} ${entry.day || ""}`,
      onchange: (event) => tick(entry.id, event.target.checked) })),
    h("td", { class: "mono", test: "row-walker" }, entry.walkerId),
    h("td", {}, entry.kind === "quarantined_day" ? "quarantined day" : "repeated rejections"),
    h("td", { class: "mono", test: "row-day" }, entry.day || "—"),
    h("td", {}, tags(entry.reasons, "reason")),
    h("td", { class: "number" }, number(entry.energyAtStake)),
    h("td", { title: instant(entry.openedAt) }, age(entry.openedAt)),
    h("td", { test: "row-claim" }, claimText(entry.claim)),
    h("td", { test: "row-status" }, entry.status === "resolved" ? resolvedAs(entry) : "open")));
    if (!rows.length) {
      rows.push(h("tr", {}, h("td", { colspan: "9", class: "empty", test: "queue-empty" },
        "No entries match these filters.")));
    }
    body.replaceChildren(...rows);
    $("next-page").disabled = !state.queue.nextCursor;
    $("first-page").disabled = !state.route.params.get("cursor");
    $("queue-summary").textContent = `${plural(items.length, "entry", "entries")} on this page`
      + (state.queue.nextCursor ? ", more on the next" : "");
    paintTicks();
  }

  function paintTicks() {
    const count = state.queue.checked.size;
    const label = $("selected-count");
    if (!label) return;
    label.textContent = `${count} selected`;
    const allowed = can("bulkDecide");
    $("bulk-accept").disabled = !allowed || count === 0;
    $("bulk-reject").disabled = !allowed || count === 0;
    $("bulk-accept").textContent = count ? `Accept selected (${count})` : "Accept selected";
    $("bulk-reject").textContent = count ? `Reject selected (${count})` : "Reject selected";
    const all = $("select-all");
    all.checked = state.queue.items.length > 0 && state.queue.items.every((entry) => state.queue.checked.has(entry.id));
  }

  function tick(id, on) {
    if (on) state.queue.checked.add(id);
    else state.queue.checked.delete(id);
    paintTicks();
  }

  function tickAll(on) {
    for (const entry of state.queue.items) {
      if (on) state.queue.checked.add(entry.id);
      else state.queue.checked.delete(entry.id);
    }
    for (const box of document.querySelectorAll("#queue-body input.pick")) box.checked = on;
    paintTicks();
  }

  function moveSelection(step) {
    const items = state.queue.items;
    if (!items.length) return;
    state.queue.selected = Math.max(0, Math.min(items.length - 1, state.queue.selected + step));
    const rows = document.querySelectorAll("#queue-body tr.row");
    rows.forEach((row, index) => {
      row.classList.toggle("selected", index === state.queue.selected);
      row.setAttribute("aria-selected", String(index === state.queue.selected));
    });
    const row = rows[state.queue.selected];
    if (row) row.scrollIntoView({ block: "nearest" });
  }

  // Leaving an open entry this reviewer holds gives it back: moving through entries (j and k, the queue link) would
  // otherwise leave every one passed over claimed for admin.claimSeconds, out of the other reviewers' reach.
  function releaseLeft(detail, next) {
    if (!heldByMe(detail)) return;
    if (next.view === "review" && next.id === detail.entry.id) return;
    api("POST", `/admin/reviews/${enc(detail.entry.id)}/release`).catch(() => {});
  }

  /** Whether the open entry of `detail` is claimed by the signed-in operator, and the claim still holds. */
  function heldByMe(detail) {
    const entry = detail && detail.entry;
    const claim = entry && entry.status === "open" ? entry.claim : null;
    return Boolean(claim && state.me && claim.operator === state.me.name && Date.parse(claim.until) > serverNow());
  }

  function openEntry(id) {
    navigate("review", id, queueParams());
  }

  async function bulkDecide(decision) {
    const ids = state.queue.items.map((entry) => entry.id).filter((id) => state.queue.checked.has(id));
    if (!ids.length || !can("bulkDecide")) return;
    const verb = decision === "accept" ? "Accept" : "Reject";
    const note = await ask({
      title: `${verb} ${plural(ids.length, "entry", "entries")}?`,
      message: `${verb} the ${plural(ids.length, "selected entry", "selected entries")} with one note. Entries `
        + "someone else holds or that are already resolved are left as they are and counted below.",
      confirm: `${verb} ${ids.length}`, note: true, danger: decision === "reject",
    });
    if (note === null) return;
    const outcomes = {};
    try {
      for (let start = 0; start < ids.length; start += BULK_CHUNK) {
        const data = await api("POST", "/admin/reviews/bulk", { ids: ids.slice(start, start + BULK_CHUNK), decision,
          note });
        for (const item of data.items || []) outcomes[item.outcome] = (outcomes[item.outcome] || 0) + 1;
      }
      state.queue.checked.clear();
      const summary = Object.entries(outcomes).map(([outcome, count]) => `${count} ${outcome.replace("_", " ")}`);
      notify(`${verb} ${plural(ids.length, "entry", "entries")}: ${summary.join(", ")}.`);
    } catch (error) {
      // A failure partway names what was done before it: say so beside the error.
      for (const item of (error.details && error.details.items) || []) {
        outcomes[item.outcome] = (outcomes[item.outcome] || 0) + 1;
      }
      const summary = Object.entries(outcomes).map(([outcome, count]) => `${count} ${outcome.replace("_", " ")}`);
      if (summary.length) notify(`Done before the failure: ${summary.join(", ")}.`);
      showError(error);
    }
    loadQueue();
  }

  // ---------------------------------------------------------------------------------------------------------------
  // The entry in detail

  async function renderDetail(id) {
    const generation = state.generation;
    $("view").replaceChildren(h("p", { class: "hint" }, "Loading…"));
    let data;
    try {
      data = await api("GET", `/admin/reviews/${enc(id)}`);
    } catch (error) {
      if (generation !== state.generation) return;
      $("view").replaceChildren(backLink());
      showError(error);
      return;
    }
    // Left while it loaded: the claim the read took goes back, as when leaving an entry on the page.
    if (generation !== state.generation) {
      releaseLeft({ entry: data.entry }, state.route);
      return;
    }
    state.detail = { entry: data.entry, evidence: data.evidence || {}, walker: data.walker || {}, account: null };
    paintDetail();
    loadAccount(generation);
    if (!state.queue.items.some((entry) => entry.id === id)) loadQueueList(generation);
  }

  async function reloadDetail() {
    const generation = state.generation;
    const current = state.detail;
    if (!current) return;
    try {
      const data = await api("GET", `/admin/reviews/${enc(current.entry.id)}?claim=false`);
      if (generation !== state.generation || !state.detail) return;
      state.detail.entry = data.entry;
      state.detail.evidence = data.evidence || {};
      state.detail.walker = data.walker || {};
      keepingFocus(paintDetailSides);
      await loadAccount(generation);
    } catch (error) {
      if (generation === state.generation) showError(error);
    }
  }

  async function loadAccount(generation) {
    const walkerId = state.detail && state.detail.entry.walkerId;
    if (!walkerId) return;
    try {
      const account = await api("GET", `/admin/walkers/${enc(walkerId)}`);
      if (generation !== state.generation || !state.detail) return;
      state.detail.account = account;
    } catch (error) {
      if (generation !== state.generation || !state.detail) return;
      state.detail.account = null;
      if (error.status !== 404) showError(error);
    }
    const node = $("walker-panel");
    if (node) keepingFocus(() => node.replaceWith(walkerPanel()));
  }

  async function loadQueueList(generation) {
    try {
      const params = queueParams();
      const data = await api("GET", `/admin/reviews?${params}`);
      if (generation !== state.generation) return;
      takeQueue(data);
      paintNeighboursNav();
    } catch (_) {
      // j/k in the detail simply have nothing to move to.
    }
  }

  function backLink() {
    return h("a", { href: link("queue", null, queueParams()), id: "back-to-queue", test: "back-to-queue" },
      "← Queue");
  }

  function canDecideEntry() {
    const detail = state.detail;
    return Boolean(detail && can("decide") && detail.entry.status === "open" && !claimedByOther(detail.entry));
  }

  function paintDetail() {
    const { entry } = state.detail;
    const header = h("div", { class: "toolbar" }, backLink(),
      h("button", { type: "button", id: "previous-entry", test: "previous-entry", onclick: () => stepEntry(-1) },
        "↑ Previous (k)"),
      h("button", { type: "button", id: "next-entry", test: "next-entry", onclick: () => stepEntry(1) },
        "↓ Next (j)"));
    const decision = panel("Decision", "decision-panel",
      h("p", { id: "claim-line", test: "claim-line" }),
      h("label", { for: "draft-note" }, "Note (n)"),
      h("textarea", { id: "draft-note", test: "draft-note", rows: "3", maxlength: "2000",
        placeholder: "Why: the note goes with the decision into the audit trail." }),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "accept", id: "accept", test: "accept", onclick: () => decide("accept") },
          "Accept (a)"),
        h("button", { type: "button", class: "reject", id: "reject", test: "reject", onclick: () => decide("reject") },
          "Reject (r)"),
        h("button", { type: "button", id: "release", test: "release", onclick: release,
          title: "Give the entry back to the queue undecided" }, "Release claim")));
    $("view").replaceChildren(
      header,
      h("h1", { id: "entry-title", test: "entry-title" },
        `${entry.kind === "quarantined_day" ? "Quarantined day" : "Repeated rejections"}: ${entry.walkerId}`
        + (entry.day ? ` · ${entry.day}` : "")),
      h("div", { class: "detail" },
        h("div", {}, h("div", { id: "entry-panel-slot" }), h("div", { id: "evidence-slot" })),
        h("div", {}, decision, h("div", { id: "day-panel-slot" }), walkerPanel(),
          h("div", { id: "allocations-slot" }))));
    paintDetailSides();
    paintNeighboursNav();
  }

  /** Every part of the detail that a refresh may change; the note being written is left alone. */
  function paintDetailSides() {
    const { entry, evidence } = state.detail;
    const submissions = evidence.submissions || [];
    $("entry-panel-slot").replaceChildren(panel("Entry", "entry-panel", h("dl", { class: "facts" },
      fact("Id", h("span", { class: "mono", test: "entry-id" }, entry.id)),
      fact("Walker", h("span", { class: "mono", test: "entry-walker" }, entry.walkerId)),
      fact("Kind", entry.kind),
      fact("Day", entry.day || "—"),
      fact("Reasons", h("span", { test: "entry-reasons" }, tags(entry.reasons, "reason"))),
      fact("Energy at stake", h("span", { test: "entry-stake" }, number(entry.energyAtStake))),
      fact("Opened", `${instant(entry.openedAt)} (${age(entry.openedAt)} ago)`),
      fact("Status", h("span", { test: "entry-status" }, entry.status === "resolved"
        ? `${resolution(entry)} at ${instant(entry.resolvedAt)}` : "open")),
      entry.note ? fact("Note", h("span", { test: "entry-note" }, entry.note)) : null)));
    $("evidence-slot").replaceChildren(
      panel("Submissions of the day", "submissions-panel",
        shownOf(submissions.length, evidence.submissionCount, "submissions-shown", "The latest", "submissions"),
        submissions.length ? submissionsChart(submissions) : null,
        table("submissions", ["Received", "Count#", "Source", "Bundle", "Span (UTC)", "tz", "Gyro", "App Check"],
          submissions.map((item) => h("tr", { test: "submission-row" },
            h("td", {}, instant(item.receivedAt, true)),
            h("td", { class: "number" }, number(item.count)),
            h("td", {}, item.source),
            h("td", { class: "mono" }, item.bundle),
            h("td", {}, `${clock(item.startUtc, true)}–${clock(item.endUtc, true)}`),
            h("td", {}, item.tz),
            h("td", {}, yesNo(item.gyro)),
            h("td", {}, yesNo(item.appCheck)))),
          "No submissions for this entry.")),
      entry.reread ? rereadPanel(entry.reread) : null,
      panel("Neighbouring days", "neighbours-panel",
        table("neighbours", ["Day", "Status", "Reported#", "Accepted#"],
          (evidence.neighbours || []).map((day) => h("tr", { test: "neighbour-row" },
            h("td", { class: "mono" }, day.day), h("td", {}, status(day.status)),
            h("td", { class: "number" }, number(day.reportedCount)),
            h("td", { class: "number" }, number(day.acceptedCount)))),
          "No days around this one.")),
      panel("Rejection history (30 days)", "rejections-panel",
        table("rejections", ["At", "Status", "Reasons"],
          (evidence.rejections || []).map((item) => h("tr", { test: "rejection-row" },
            h("td", {}, instant(item.at)), h("td", {}, status(item.status)), h("td", {}, tags(item.reasons, "reason")))),
          "No rejections or quarantines in the last 30 days.")));
    const day = evidence.day;
    // An accepted day, or a rejected one that still holds credit (accepted once, a later submission then
    // rejected by review): the reversal takes that credit back.
    const reversible = Boolean(day && (day.status === "ACCEPTED"
      || (day.status === "REJECTED" && day.energyCredited > 0)));
    $("day-panel-slot").replaceChildren(panel("The day", "day-panel",
      day ? h("dl", { class: "facts" },
        fact("Status", h("span", { test: "day-status" }, status(day.status))),
        fact("Reported", number(day.reportedCount)),
        fact("Accepted", h("span", { test: "day-accepted" }, number(day.acceptedCount))),
        fact("Time zone", day.tz || "—")) : h("p", { class: "hint" }, "This entry is not about one day."),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "danger", id: "reverse", test: "reverse", onclick: reverseDay,
          disabled: !(reversible && can("decide")),
          title: reversible ? "Reject this day: the credit it holds is taken back"
            : "Only a day that holds credit: accepted, or rejected after an acceptance" },
        "Reverse day's credit"))));
    $("allocations-slot").replaceChildren(panel("Allocations drawing on the day", "allocations-panel",
      shownOf((evidence.allocations || []).length, evidence.allocationCount, "allocations-shown", "The oldest",
        "open allocations"),
      table("allocations", ["Allocation", "Points#", "Drawn#", "Status"],
        (evidence.allocations || []).map((item) => h("tr", { test: "allocation-row" },
          h("td", { class: "mono" }, item.id), h("td", { class: "number" }, number(item.points)),
          h("td", { class: "number" }, number(item.drawn)), h("td", {}, item.status))),
        "No open allocation depends on this day.")));
    const walkerNode = $("walker-panel");
    if (walkerNode) walkerNode.replaceWith(walkerPanel());
    paintDecisionState();
  }

  /** A hint when the server showed only part of a list (it shows at most 500 of a day's submissions and
   *  allocations); nothing when all are shown. */
  function shownOf(shown, total, test, which, what) {
    return total > shown
      ? h("p", { class: "hint", test }, `${which} ${number(shown)} of ${number(total)} ${what} are shown.`) : null;
  }

  /** The challenge re-read behind the entry: what was asked, and what the app answered (or that nothing came). */
  function rereadPanel(reread) {
    const answer = reread.answer;
    const asked = reread.window || {};
    return panel("Challenge re-read", "reread-panel",
      h("dl", { class: "facts" },
        fact("Request", h("span", { class: "mono", test: "reread-request" }, reread.requestId || "—")),
        fact("Window (UTC)", `${instant(asked.startUtc)} – ${instant(asked.endUtc)}`),
        fact("Asked", instant(reread.requestedAt)),
        fact("Deadline", instant(reread.deadline)),
        fact("State", h("span", { test: "reread-state" }, reread.state || "—")),
        fact("Findings", h("span", { test: "reread-reasons" }, tags(reread.reasons, "reason"))),
        fact("Answered", instant(reread.answeredAt)),
        answer ? fact("Sample digest", h("span", { class: "mono", test: "reread-digest" }, answer.sampleDigest))
          : null),
      answer
        ? table("reread-counts", ["Bundle", "Count#", "Span (UTC)"],
          (answer.counts || []).map((item) => h("tr", { test: "reread-count-row" },
            h("td", { class: "mono" }, item.sourceBundleId),
            h("td", { class: "number" }, number(item.count)),
            h("td", {}, item.sampleSpan ? `${instant(item.sampleSpan.startUtc)} – ${instant(item.sampleSpan.endUtc)}` : "—"))),
          "The answer held no counts.")
        : h("p", { class: "hint", test: "reread-unanswered" }, "The app did not answer before the deadline."));
  }

  function paintDecisionState() {
    const { entry } = state.detail;
    const line = $("claim-line");
    if (entry.status === "resolved") {
      const text = resolution(entry);
      line.textContent = `${text[0].toUpperCase()}${text.slice(1)}.`;
    } else if (!entry.claim) {
      line.textContent = can("decide") ? "Not claimed." : "Your role may look but not decide.";
    } else if (claimedByOther(entry)) {
      line.replaceChildren(h("span", { class: "claim-other", test: "claimed-by-other" },
        `Claimed by ${entry.claim.operator} until ${instant(entry.claim.until)}: you cannot decide it.`));
    } else {
      line.replaceChildren(h("span", { class: "claim-mine", test: "claimed-by-me" },
        `Claimed by you until ${instant(entry.claim.until)}.`));
    }
    const allowed = canDecideEntry();
    $("accept").disabled = !allowed;
    $("reject").disabled = !allowed;
    const claim = entry.status === "open" ? entry.claim : null;
    $("release").disabled = !(claim && can("decide") && (!claimedByOther(entry) || state.me.role === "operator"));
  }

  async function release() {
    const detail = state.detail;
    if (!detail || !detail.entry.claim) return;
    try {
      const entry = await api("POST", `/admin/reviews/${enc(detail.entry.id)}/release`);
      if (state.detail && state.detail.entry.id === entry.id) {
        state.detail.entry = entry;
        paintDecisionState();
      }
      notify(`Released ${entry.walkerId}${entry.day ? ` ${entry.day}` : ""}.`);
    } catch (error) {
      showError(error);
    }
  }

  function walkerPanel() {
    const detail = state.detail;
    const walker = (detail && detail.walker) || {};
    const account = detail && detail.account;
    const suspended = account ? account.suspended : walker.suspended;
    return panel("Walker", "walker-panel",
      h("dl", { class: "facts" },
        fact("Id", h("span", { class: "mono" }, walker.id || (detail && detail.entry.walkerId))),
        fact("State", h("span", { test: "walker-state" }, suspended ? `suspended since ${instant(
          (account && account.suspendedAt) || walker.suspendedAt)}` : "active")),
        account && account.suspensionNote ? fact("Suspension note", account.suspensionNote) : null,
        fact("Lifetime steps", h("span", { test: "walker-lifetime" },
          number(account ? account.lifetimeSteps : walker.lifetimeSteps))),
        fact("Energy confirmed", h("span", { test: "walker-confirmed" },
          number(account && account.energy ? account.energy.confirmed : undefined))),
        fact("Energy pending", h("span", { test: "walker-pending" },
          number(account && account.energy ? account.energy.pending : undefined))),
        fact("Open reviews", number(account ? account.openReviews : undefined))),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "danger", id: "suspend", test: "suspend", onclick: () => suspend(true),
          disabled: !can("decide") || Boolean(suspended) }, "Suspend walker"),
        h("button", { type: "button", id: "reinstate", test: "reinstate", onclick: () => suspend(false),
          disabled: !can("decide") || !suspended }, "Reinstate walker")));
  }

  function fact(label, value) {
    return [h("dt", {}, label), h("dd", {}, value)];
  }

  function yesNo(value) {
    return value === true ? "yes" : value === false ? "no" : "—";
  }

  function paintNeighboursNav() {
    const previous = $("previous-entry");
    if (!previous || !state.detail) return;
    const index = state.queue.items.findIndex((entry) => entry.id === state.detail.entry.id);
    previous.disabled = index <= 0;
    $("next-entry").disabled = index < 0 ? state.queue.items.length === 0 : index >= state.queue.items.length - 1;
  }

  function stepEntry(step) {
    if (!state.detail) return;
    const items = state.queue.items;
    const index = items.findIndex((entry) => entry.id === state.detail.entry.id);
    const target = index < 0 ? items[0] : items[index + step];
    if (target) openEntry(target.id);
  }

  /** The day's submissions over time: count against arrival, one line per source bundle (inline SVG, DOM-built). */
  function submissionsChart(submissions) {
    const width = 640;
    const height = 200;
    const left = 56;
    const right = 14;
    const top = 12;
    const bottom = 30;
    const points = submissions
      .map((item) => ({ at: Date.parse(item.receivedAt), count: item.count, bundle: item.bundle || item.source }))
      .filter((point) => !Number.isNaN(point.at) && typeof point.count === "number");
    const series = new Map();
    for (const point of points) {
      if (!series.has(point.bundle)) series.set(point.bundle, []);
      series.get(point.bundle).push(point);
    }
    let first = Math.min(...points.map((point) => point.at));
    let last = Math.max(...points.map((point) => point.at));
    // At least two seconds across, and a margin, so arrivals close together are still told apart.
    const widen = Math.max(0, 2000 - (last - first)) / 2;
    const margin = (last - first + 2 * widen) * 0.05;
    first -= widen + margin;
    last += widen + margin;
    const highest = Math.max(1, ...points.map((point) => point.count));
    const x = (at) => left + ((at - first) / (last - first)) * (width - left - right);
    const y = (count) => height - bottom - (count / highest) * (height - top - bottom);
    const chart = svg("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "data-test": "chart",
      id: "chart", "aria-label": `Submissions over time for ${series.size} source bundle(s)` });
    for (const fraction of [0, 0.5, 1]) {
      const value = Math.round(highest * fraction);
      chart.append(
        svg("line", { class: "grid-line", x1: left, x2: width - right, y1: y(value), y2: y(value) }),
        svg("text", { x: left - 6, y: y(value) + 3, "text-anchor": "end" }, integer.format(value)));
    }
    chart.append(
      svg("line", { class: "axis", x1: left, x2: left, y1: top, y2: height - bottom }),
      svg("line", { class: "axis", x1: left, x2: width - right, y1: height - bottom, y2: height - bottom }),
      svg("text", { x: left, y: height - 10, "text-anchor": "start" }, `${instant(new Date(first).toISOString())}`),
      svg("text", { x: width - right, y: height - 10, "text-anchor": "end" },
        `${instant(new Date(last).toISOString())}`));
    const legend = h("div", { class: "legend", test: "chart-legend" });
    [...series.entries()].forEach(([bundle, list], index) => {
      const colour = `series-${index % 6}`;
      list.sort((a, b) => a.at - b.at);
      chart.append(svg("polyline", { class: `series ${colour}`, "data-test": "chart-series", "data-bundle": bundle,
        points: list.map((point) => `${x(point.at).toFixed(1)},${y(point.count).toFixed(1)}`).join(" ") }));
      for (const point of list) {
        chart.append(svg("circle", { class: colour, cx: x(point.at).toFixed(1), cy: y(point.count).toFixed(1), r: 3.5,
          "data-test": "chart-point" },
        svg("title", {}, `${bundle}: ${integer.format(point.count)} at ${instant(new Date(point.at).toISOString())}`)));
      }
      legend.append(h("span", {}, h("span", { class: `swatch ${colour}` }), bundle));
    });
    return h("figure", { class: "chart-figure", test: "chart-figure" }, chart, legend);
  }

  async function decide(decision) {
    if (state.busy || !canDecideEntry()) return;
    const { entry } = state.detail;
    // The day's submissions as shown (the refresh pauses while the dialog is open): if the walker synced again
    // meanwhile, the server refuses the decision (EVIDENCE_CHANGED) and the entry is read again.
    const evidenceVersion = state.detail.evidence.version;
    const verb = decision === "accept" ? "Accept" : "Reject";
    const note = await ask({
      title: `${verb} ${entry.walkerId}${entry.day ? ` · ${entry.day}` : ""}?`,
      message: `Reasons: ${(entry.reasons || []).join(", ") || "—"}. Energy at stake: ${number(entry.energyAtStake)}.`,
      confirm: verb, note: true, initial: $("draft-note") ? $("draft-note").value : "",
      danger: decision === "reject",
    });
    if (note === null || !state.detail || state.detail.entry.id !== entry.id) return;
    state.busy = true;
    try {
      const body = evidenceVersion ? { decision, note, evidenceVersion } : { decision, note };
      await api("POST", `/admin/reviews/${enc(entry.id)}/resolve`, body);
      // Decided, it holds no claim to give back when the console moves on.
      if (state.detail && state.detail.entry.id === entry.id) state.detail.entry.status = "resolved";
      state.flash = { notice: `${verb}ed ${entry.walkerId}${entry.day ? ` ${entry.day}` : ""}.` };
      await advance(entry.id);
    } catch (error) {
      showError(error);
      await reloadDetail();
    } finally {
      state.busy = false;
    }
  }

  /**
   * After a decision: the next open entry of the queue, in the queue's order, that nobody else holds. Read from the
   * reviewer's own page (its cursor kept): an entry after the decided one, else the first of the pages after it
   * (at most ADVANCE_PAGES read), else one the reviewer passed over on that page, else the first page's first.
   */
  async function advance(doneId) {
    // The reviewer may go elsewhere while the queue is read: then that is where the console stays.
    const generation = state.generation;
    const start = queueParams();
    const before = state.queue.items.map((entry) => entry.id);
    const after = new Set(before.slice(before.indexOf(doneId) + 1));
    const open = (entry) => entry.id !== doneId && entry.status === "open" && !claimedByOther(entry);
    let found = null;
    let failed = false;
    try {
      let params = start;
      let passedOver = null;
      for (let page = 0; page < ADVANCE_PAGES && !found; page += 1) {
        const data = await api("GET", `/admin/reviews?${params}`);
        const items = Array.isArray(data.items) ? data.items : [];
        const next = items.find((entry) => open(entry) && (page > 0 || after.has(entry.id)));
        if (next) found = { id: next.id, params, data };
        else if (page === 0 && items.some(open)) passedOver = { id: items.find(open).id, params, data };
        if (!data.nextCursor) break;
        params = new URLSearchParams(params);
        params.set("cursor", data.nextCursor);
      }
      found = found || passedOver;
      if (!found && start.get("cursor")) {
        const first = new URLSearchParams(start);
        first.delete("cursor");
        const data = await api("GET", `/admin/reviews?${first}`);
        const next = (Array.isArray(data.items) ? data.items : []).find(open);
        if (next) found = { id: next.id, params: first, data };
      }
    } catch (error) {
      failed = true;
      state.flash = { ...(state.flash || {}), error };
    }
    if (generation !== state.generation) return;
    if (found) {
      takeQueue(found.data);
      navigate("review", found.id, found.params);
    } else {
      if (!failed) {
        const notice = `${(state.flash && state.flash.notice) || ""} No more open entries here.`.trim();
        state.flash = { ...(state.flash || {}), notice };
      }
      const first = new URLSearchParams(start);
      first.delete("cursor");
      navigate("queue", null, first);
    }
  }

  async function reverseDay() {
    const detail = state.detail;
    if (!detail || !detail.evidence.day || !can("decide")) return;
    const walkerId = detail.entry.walkerId;
    const day = detail.evidence.day.day;
    const note = await ask({
      title: `Reverse ${walkerId} · ${day}?`,
      message: "The accepted day becomes REJECTED: its credit, lifetime steps and streak are undone, and allocations "
        + "that drew on it are refunded after the grace period.",
      confirm: "Reverse", note: true, danger: true, initial: $("draft-note") ? $("draft-note").value : "",
    });
    if (note === null) return;
    try {
      const result = await api("POST", `/admin/walkers/${enc(walkerId)}/days/${enc(day)}/reverse`, { note });
      notify(`Reversed ${walkerId} ${day}: ${number(result.reversedEnergy)} Energy taken back.`);
    } catch (error) {
      showError(error);
    }
    await reloadDetail();
  }

  async function suspend(on) {
    const detail = state.detail;
    if (!detail || !can("decide")) return;
    const walkerId = detail.entry.walkerId;
    const verb = on ? "Suspend" : "Reinstate";
    const note = await ask({
      title: `${verb} ${walkerId}?`,
      message: on ? "A suspended walker's ingests and re-reads are refused (403 WALKER_SUSPENDED); nothing is deleted."
        : "The walker's ingests are accepted again.",
      confirm: verb, note: true, danger: on, initial: $("draft-note") ? $("draft-note").value : "",
    });
    if (note === null) return;
    try {
      await api("POST", `/admin/walkers/${enc(walkerId)}/${on ? "suspend" : "reinstate"}`, { note });
      notify(`${verb}d ${walkerId}.`);
    } catch (error) {
      showError(error);
    }
    await reloadDetail();
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Jobs

  function renderJobs() {
    const params = state.route.params;
    const form = h("form", { class: "filters", id: "job-filters", test: "job-filters", onsubmit: (event) => {
      event.preventDefault();
      const next = new URLSearchParams();
      if ($("filter-state").value) next.set("state", $("filter-state").value);
      if ($("filter-job-kind").value.trim()) next.set("kind", $("filter-job-kind").value.trim());
      navigate("jobs", null, next);
    } },
    field("State", choice("filter-state", [["", "any"], ["pending", "pending"], ["running", "running"],
      ["dead", "dead"]], params.get("state") || "")),
    field("Kind", textInput("filter-job-kind", params.get("kind"), "webhook")),
    h("button", { type: "submit", class: "primary", id: "apply-job-filters", test: "apply-job-filters" }, "Apply"));
    const allowed = can("manageJobs");
    const toolbar = h("div", { class: "toolbar" },
      h("span", { class: "count", id: "jobs-selected", test: "jobs-selected" }, "0 selected"),
      h("button", { type: "button", id: "jobs-retry", test: "jobs-retry", disabled: true,
        onclick: () => jobAction("retry", [...state.jobs.checked]) }, "Retry selected"),
      h("button", { type: "button", class: "danger", id: "jobs-discard", test: "jobs-discard", disabled: true,
        onclick: () => jobAction("discard", [...state.jobs.checked]) }, "Discard selected"),
      allowed ? null : h("span", { class: "hint" }, "Your role may look at jobs but not retry or discard them."));
    const grid = h("table", { class: "grid", id: "jobs-table", test: "jobs-table" },
      h("thead", {}, h("tr", {}, h("th", {}), ["Job", "Kind", "Walker", "State", "Attempts", "Runs at", "Last error",
        ""].map((text) => h("th", {}, text)))),
      h("tbody", { id: "jobs-body", test: "jobs-body" }));
    const pager = h("div", { class: "pager" },
      h("button", { type: "button", id: "jobs-first-page", test: "jobs-first-page", disabled: !params.get("cursor"),
        onclick: () => { const next = only(params, JOB_KEYS); next.delete("cursor"); navigate("jobs", null, next); } },
      "First page"),
      h("button", { type: "button", id: "jobs-next-page", test: "jobs-next-page", disabled: true, onclick: () => {
        const next = only(params, JOB_KEYS);
        next.set("cursor", state.jobs.nextCursor);
        navigate("jobs", null, next);
      } }, "Next page"));
    state.jobs.checked.clear();
    $("view").replaceChildren(h("h1", {}, "Jobs"), form, toolbar, grid, pager);
    loadJobs();
  }

  async function loadJobs() {
    const generation = state.generation;
    try {
      const data = await api("GET", `/admin/jobs?${only(state.route.params, JOB_KEYS)}`);
      if (generation !== state.generation) return;
      state.jobs.items = Array.isArray(data.items) ? data.items : [];
      state.jobs.nextCursor = data.nextCursor || null;
      const dead = new Set(state.jobs.items.filter((job) => job.state === "dead").map((job) => job.id));
      for (const id of [...state.jobs.checked]) if (!dead.has(id)) state.jobs.checked.delete(id);
      keepingFocus(paintJobs);
    } catch (error) {
      if (generation === state.generation) showError(error);
    }
  }

  function paintJobs() {
    const body = $("jobs-body");
    if (!body) return;
    const allowed = can("manageJobs");
    const rows = state.jobs.items.map((job) => {
      const dead = job.state === "dead";
      return h("tr", { test: "job-row", "data-id": job.id, "data-state": job.state },
        h("td", {}, h("input", { type: "checkbox", class: "pick", test: "job-pick", "data-id": job.id,
          disabled: !(allowed && dead), checked: state.jobs.checked.has(job.id), "aria-label": `Tick job ${job.id}`,
          onchange: (event) => {
            if (event.target.checked) state.jobs.checked.add(job.id);
            else state.jobs.checked.delete(job.id);
            paintJobTicks();
          } })),
        h("td", { class: "mono" }, job.id),
        h("td", {}, job.kind),
        h("td", { class: "mono" }, job.walkerId || "—"),
        h("td", { test: "job-state" }, job.state),
        h("td", {}, `${job.attempts}/${job.maxAttempts}`),
        h("td", {}, instant(job.runAt)),
        h("td", { class: "mono" }, job.lastError || "—"),
        h("td", {},
          h("button", { type: "button", test: "job-retry", "data-id": job.id, disabled: !(allowed && dead),
            onclick: () => jobAction("retry", [job.id]) }, "Retry"),
          " ",
          h("button", { type: "button", class: "danger", test: "job-discard", "data-id": job.id,
            disabled: !(allowed && dead), onclick: () => jobAction("discard", [job.id]) }, "Discard")));
    });
    if (!rows.length) {
      rows.push(h("tr", {}, h("td", { colspan: "9", class: "empty", test: "jobs-empty" }, "No jobs match.")));
    }
    body.replaceChildren(...rows);
    $("jobs-next-page").disabled = !state.jobs.nextCursor;
    paintJobTicks();
  }

  function paintJobTicks() {
    const count = state.jobs.checked.size;
    const allowed = can("manageJobs");
    $("jobs-selected").textContent = `${count} selected`;
    $("jobs-retry").disabled = !allowed || count === 0;
    $("jobs-discard").disabled = !allowed || count === 0;
    $("jobs-retry").textContent = count ? `Retry selected (${count})` : "Retry selected";
    $("jobs-discard").textContent = count ? `Discard selected (${count})` : "Discard selected";
  }

  async function jobAction(action, ids) {
    if (!ids.length || !can("manageJobs")) return;
    const verb = action === "retry" ? "Retry" : "Discard";
    const confirmed = await ask({
      title: `${verb} ${plural(ids.length, "job", "jobs")}?`,
      message: action === "retry" ? `The ${plural(ids.length, "dead job runs", "dead jobs run")} again from the `
        + "start, with fresh attempts." : `The ${plural(ids.length, "dead job is", "dead jobs are")} removed for good.`,
      confirm: `${verb} ${ids.length}`, note: false, danger: action === "discard",
    });
    if (confirmed === null) return;
    // Counted outside the try: a failure partway reports what was done before it.
    const outcomes = {};
    try {
      if (ids.length === 1) {
        const data = await api("POST", `/admin/jobs/${enc(ids[0])}/${action}`);
        outcomes[data.outcome] = 1;
      } else {
        for (let start = 0; start < ids.length; start += BULK_CHUNK) {
          const data = await api("POST", "/admin/jobs/bulk", { action, ids: ids.slice(start, start + BULK_CHUNK) });
          for (const item of data.items || []) outcomes[item.outcome] = (outcomes[item.outcome] || 0) + 1;
        }
      }
      state.jobs.checked.clear();
      const summary = Object.entries(outcomes).map(([outcome, count]) => `${count} ${outcome.replace("_", " ")}`);
      notify(`${verb} ${plural(ids.length, "job", "jobs")}: ${summary.join(", ")}.`);
    } catch (error) {
      // A failure partway names what was done before it: say so beside the error.
      for (const item of (error.details && error.details.items) || []) {
        outcomes[item.outcome] = (outcomes[item.outcome] || 0) + 1;
      }
      const summary = Object.entries(outcomes).map(([outcome, count]) => `${count} ${outcome.replace("_", " ")}`);
      if (summary.length) notify(`Done before the failure: ${summary.join(", ")}.`);
      showError(error);
    }
    loadJobs();
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Metrics

  function renderMetrics() {
    $("view").replaceChildren(h("h1", {}, "Metrics"), h("div", { class: "metrics", id: "metrics", test: "metrics" },
      h("p", { class: "hint" }, "Loading…")));
    loadMetrics();
  }

  async function loadMetrics() {
    const generation = state.generation;
    try {
      const data = await api("GET", "/admin/metrics");
      if (generation !== state.generation) return;
      paintMetrics(data || {});
    } catch (error) {
      if (generation === state.generation) showError(error);
    }
  }

  function paintMetrics(data) {
    const node = $("metrics");
    if (!node) return;
    const reviews = data.reviews || {};
    const open = reviews.open || {};
    const oldest = reviews.oldestOpenAgeSeconds || {};
    const kinds = [...new Set([...Object.keys(open), ...Object.keys(oldest)])].sort();
    const jobs = data.jobs || {};
    const byState = jobs.byState || {};
    node.replaceChildren(
      panel("Open reviews", "metrics-reviews", table("metrics-reviews-table", ["Kind", "Open#", "Oldest"],
        kinds.map((kind) => h("tr", {},
          h("td", {}, kind),
          h("td", { class: "number", test: `metric-open-${kind}` }, number(open[kind] || 0)),
          h("td", { test: `metric-oldest-${kind}` }, duration(oldest[kind])))), "No kinds reported.")),
      panel("Job queue", "metrics-jobs",
        table("metrics-jobs-table", ["State", "Jobs#"], ["pending", "running", "dead"].map((name) =>
          h("tr", {}, h("td", {}, name), h("td", { class: "number", test: `metric-jobs-${name}` },
            number(byState[name] || 0))))),
        h("p", {}, "Oldest runnable job waiting: ",
          h("span", { test: "metric-job-lag" }, duration(jobs.oldestRunnableAgeSeconds)))),
      panel("Decisions", "metrics-decisions", table("metrics-decisions-table", ["Operator", "Outcome", "Count#"],
        (data.decisions || []).map((row) => h("tr", { test: "metric-decision-row" },
          h("td", {}, row.operator), h("td", { class: `outcome-${row.outcome}` }, row.outcome),
          h("td", { class: "number" }, number(row.count)))), "No decisions yet.")));
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Audit

  function renderAudit() {
    const params = state.route.params;
    const form = h("form", { class: "filters", id: "audit-filters", test: "audit-filters", onsubmit: (event) => {
      event.preventDefault();
      const next = new URLSearchParams();
      if ($("filter-operator").value.trim()) next.set("operator", $("filter-operator").value.trim());
      if ($("filter-action").value) next.set("action", $("filter-action").value);
      navigate("audit", null, next);
    } },
    field("Operator", textInput("filter-operator", params.get("operator"), "name")),
    field("Action", choice("filter-action", [["", "any"], ...AUDIT_ACTIONS.map((action) => [action, action])],
      params.get("action") || "")),
    h("button", { type: "submit", class: "primary", id: "apply-audit-filters", test: "apply-audit-filters" },
      "Apply"));
    $("view").replaceChildren(h("h1", {}, "Audit trail"), form, h("div", { id: "audit-slot" }),
      h("div", { class: "pager" },
        h("button", { type: "button", id: "audit-first-page", test: "audit-first-page", disabled: !params.get("cursor"),
          onclick: () => { const next = only(params, AUDIT_KEYS); next.delete("cursor"); navigate("audit", null, next); } },
        "First page"),
        h("button", { type: "button", id: "audit-next-page", test: "audit-next-page", disabled: true }, "Next page")));
    loadAudit();
  }

  async function loadAudit() {
    const generation = state.generation;
    const params = only(state.route.params, AUDIT_KEYS);
    try {
      const data = await api("GET", `/admin/audit?${params}`);
      if (generation !== state.generation) return;
      $("audit-slot").replaceChildren(table("audit", ["At", "Operator", "Role", "Action", "Target", "Outcome", "Note"],
        (data.items || []).map((item) => h("tr", { test: "audit-row" },
          h("td", {}, instant(item.at)), h("td", {}, item.operator), h("td", {}, item.role),
          h("td", { class: "mono" }, item.action), h("td", { class: "mono" }, item.target),
          h("td", {}, item.outcome), h("td", {}, item.note || "—"))), "No audit rows match."));
      const next = $("audit-next-page");
      next.disabled = !data.nextCursor;
      next.onclick = null;
      next.addEventListener("click", () => {
        const following = only(state.route.params, AUDIT_KEYS);
        following.set("cursor", data.nextCursor);
        navigate("audit", null, following);
      }, { once: true });
    } catch (error) {
      if (generation === state.generation) showError(error);
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Dialogs: one for confirmations and notes, one for help. Live refresh pauses while either is open.

  let pending = null; // {resolve, note}

  function ask({ title, message, confirm, note, initial, danger }) {
    if (pending) finish(null);
    return new Promise((resolve) => {
      $("dialog-title").textContent = title;
      $("dialog-message").textContent = message || "";
      const area = $("dialog-note");
      area.value = initial || "";
      area.hidden = !note;
      area.required = Boolean(note);
      $("dialog-note-label").hidden = !note;
      $("dialog-note-hint").hidden = !note;
      $("dialog-note-hint").textContent = "Enter confirms, Shift+Enter starts a new line, Esc cancels.";
      const button = $("dialog-confirm");
      button.textContent = confirm;
      button.className = danger ? "danger" : "primary";
      pending = { resolve, note: Boolean(note) };
      openDialog($("dialog"));
      (note ? area : button).focus();
    });
  }

  function finish(value) {
    const waiting = pending;
    pending = null;
    const dialog = $("dialog");
    if (dialog.open) dialog.close();
    if (waiting) waiting.resolve(value);
  }

  function confirmDialog(event) {
    event.preventDefault();
    if (!pending) return;
    const area = $("dialog-note");
    if (pending.note) {
      const text = area.value.trim();
      if (!text) {
        $("dialog-note-hint").textContent = "A note is required.";
        area.focus();
        return;
      }
      finish(text);
    } else {
      finish("");
    }
  }

  function openDialog(dialog) {
    if (!dialog.open) dialog.showModal();
    updateRefreshState();
  }

  function closeDialogs() {
    finish(null);
    const help = $("help");
    if (help.open) help.close();
  }

  function dialogOpen() {
    return document.querySelector("dialog[open]") !== null;
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Live refresh: the queue, the jobs, the metrics and the detail's side panels, every few seconds, except while a
  // dialog is open or the tab is hidden.

  function startRefresh() {
    stopRefresh();
    state.timer = setInterval(refresh, REFRESH_MS);
    updateRefreshState();
  }

  function stopRefresh() {
    if (state.timer) clearInterval(state.timer);
    state.timer = null;
  }

  function refreshing() {
    return ["queue", "jobs", "metrics", "review"].includes(state.route.view);
  }

  function updateRefreshState() {
    const label = $("refresh-state");
    if (!state.me || !refreshing()) {
      label.hidden = true;
      return;
    }
    const paused = dialogOpen();
    label.hidden = false;
    label.classList.toggle("paused", paused);
    label.dataset.state = paused ? "paused" : "live";
    label.textContent = paused ? "Live refresh paused (dialog open)" : `Live · every ${REFRESH_MS / 1000} s`;
  }

  async function refresh() {
    updateRefreshState();
    if (!state.me || state.refreshing || state.busy || dialogOpen() || document.hidden) return;
    state.refreshing = true;
    try {
      const view = state.route.view;
      if (view === "queue") await loadQueue();
      else if (view === "jobs") await loadJobs();
      else if (view === "metrics") await loadMetrics();
      else if (view === "review" && state.detail) await reloadDetail();
    } finally {
      state.refreshing = false;
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Keyboard

  function onKey(event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    if (dialogOpen()) return; // the dialog's own keys: Enter confirms, Esc cancels
    const target = event.target;
    if (target instanceof Element && target.closest("input, textarea, select")) {
      if (event.key === "Escape") target.blur();
      return;
    }
    if (!state.me) return;
    if (event.key === "Enter" && target instanceof Element && target.closest("button, a")) return;
    const view = state.route.view;
    const key = event.key;
    let handled = true;
    if (key === "?") {
      openDialog($("help"));
    } else if (view === "queue" && (key === "j" || key === "k")) {
      moveSelection(key === "j" ? 1 : -1);
    } else if (view === "queue" && key === "Enter") {
      const entry = state.queue.items[state.queue.selected];
      if (entry) openEntry(entry.id);
    } else if (view === "queue" && key === "x") {
      const entry = state.queue.items[state.queue.selected];
      if (entry) {
        tick(entry.id, !state.queue.checked.has(entry.id));
        const box = document.querySelector(`#queue-body input.pick[data-id="${CSS.escape(entry.id)}"]`);
        if (box) box.checked = state.queue.checked.has(entry.id);
      }
    } else if (view === "review" && (key === "j" || key === "k")) {
      stepEntry(key === "j" ? 1 : -1);
    } else if (view === "review" && key === "a") {
      decide("accept");
    } else if (view === "review" && key === "r") {
      decide("reject");
    } else if (view === "review" && key === "n") {
      const draft = $("draft-note");
      if (draft) draft.focus();
    } else if (view === "review" && key === "u") {
      navigate("queue", null, queueParams());
    } else {
      handled = false;
    }
    if (handled) event.preventDefault();
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Start

  function wireStaticControls() {
    $("sign-in-form").addEventListener("submit", signIn);
    $("sign-out").addEventListener("click", signOut);
    $("banner-close").addEventListener("click", clearError);
    $("help-button").addEventListener("click", () => openDialog($("help")));
    $("dialog-form").addEventListener("submit", confirmDialog);
    $("dialog-cancel").addEventListener("click", () => finish(null));
    $("dialog-note").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) {
        event.preventDefault();
        $("dialog-form").requestSubmit();
      }
    });
    for (const dialog of document.querySelectorAll("dialog")) {
      dialog.addEventListener("close", () => {
        if (dialog.id === "dialog" && pending) finish(null);
        updateRefreshState();
      });
    }
    document.addEventListener("keydown", onKey);
    document.addEventListener("visibilitychange", recheckSession);
    window.addEventListener("focus", recheckSession);
    window.addEventListener("hashchange", route);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot);
  else boot();
})();
