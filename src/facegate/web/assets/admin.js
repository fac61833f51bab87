// The admin view: tenants, their policy (a form built from the API's own PolicySpec schema,
// so its limits are the server's), API keys (a new secret shown once; revoke), usage per
// tenant, the takedown cases (takedown.js), and the audit log with its verification state
// where the server offers them.

import { ApiError, api } from "./api.js";
import { $, announce, flashMessage, formatTime, h, showError } from "./dom.js";
import { loadTakedown } from "./takedown.js";
import { renderTenantUsage } from "./usage.js";

// Mirrors tenancy.schemas.KNOWN_PROCESSORS (the schema types the list as plain strings).
const KNOWN_PROCESSORS = [
  "face_swapper", "face_enhancer", "frame_enhancer", "face_debugger", "age_modifier",
  "expression_restorer",
];
// PolicySpec accepts the specification's names on input; PolicyOut answers with these.
const OUTPUT_NAMES = {
  gpu_limit: "device_limit", output_resolution: "max_output_resolution", MODEL_TAG: "model_tag",
};
const LABELS = { gpu_limit: "Device (GPU) Limit", output_resolution: "Max Output Resolution" };

const state = { selected: null, schema: null };

async function policySchema() {
  if (!state.schema) {
    const openapi = await api("/openapi.json");
    state.schema = openapi.components.schemas.PolicySpec.properties;
  }
  return state.schema;
}

export async function showAdmin() {
  await loadTenants();
  if (state.selected) await selectTenant(state.selected);
  await loadUsage();
  await loadTakedown(loadAudit);
  await loadAudit();
}

async function loadTenants() {
  const tenants = await api("/v1/admin/tenants");
  $("#tenant-table tbody").replaceChildren(...tenants.map((tenant) =>
    h("tr", { "aria-selected": tenant.id === state.selected ? "true" : null },
      h("th", { scope: "row" }, h("span", {}, tenant.id), h("br"),
        h("span", { class: "muted small" }, tenant.name)),
      h("td", {}, h("span", { class: `badge status-${tenant.status}` }, tenant.status)),
      h("td", {}, tenant.isolation),
      h("td", { class: "actions" },
        h("button", {
          type: "button", class: "secondary", onclick: () => selectTenant(tenant.id),
          "aria-label": `Manage ${tenant.id}`,
        }, "Manage"),
        h("button", {
          type: "button", class: "secondary",
          onclick: () => setStatus(tenant.id, tenant.status === "active" ? "suspend" : "resume"),
        }, tenant.status === "active" ? "Suspend" : "Resume")))));
}

async function setStatus(id, verb) {
  try {
    await api(`/v1/admin/tenants/${encodeURIComponent(id)}/${verb}`, { method: "POST" });
    announce(`Tenant ${id} ${verb === "suspend" ? "suspended" : "resumed"}.`);
    await loadTenants();
    await loadAudit();
  } catch (error) {
    flashMessage(error.message);
  }
}

async function createTenant(event) {
  event.preventDefault();
  const form = event.currentTarget;
  const error = $("#tenant-error");
  const id = $("#tenant-id");
  if (!id.checkValidity()) {
    showError(error, "The tenant id must be 1–63 lowercase letters, digits or “-”, not starting or ending with “-”.");
    id.focus();
    return;
  }
  try {
    const body = { id: id.value };
    if ($("#tenant-name").value.trim()) body.name = $("#tenant-name").value.trim();
    await api("/v1/admin/tenants", { method: "POST", json: body });
    showError(error, "");
    form.reset();
    announce(`Tenant ${body.id} created.`);
    await loadTenants();
    await selectTenant(body.id);
    await loadAudit();
  } catch (failure) {
    showError(error, failure.message);
  }
}

async function selectTenant(id) {
  state.selected = id;
  // One request at a time: an admin's read of a tenant is itself audited (a write), and
  // SQLite refuses a second writer that started reading before the first one committed.
  const policy = await api(`/v1/admin/tenants/${encodeURIComponent(id)}/policy`);
  const keys = await api(`/v1/admin/tenants/${encodeURIComponent(id)}/keys`);
  const schema = await policySchema();
  $("#tenant-detail").hidden = false;
  $("#tenant-detail-title").textContent = `Tenant ${id}`;
  $("#new-secret").hidden = true;
  renderPolicy(schema, policy);
  renderKeys(keys);
  for (const row of document.querySelectorAll("#tenant-table tbody tr")) {
    row.setAttribute("aria-selected", String(row.querySelector("th span").textContent === id));
  }
}

/** The schema's kind of a field: a nullable string is a "string" that may be left empty. */
function kindOf(spec) {
  if (spec.enum) return "enum";
  const variants = spec.anyOf ? spec.anyOf.filter((v) => v.type !== "null") : [spec];
  const main = variants.length === 1 ? variants[0] : {};
  if (main.type === "array" && main.items && main.items.type === "string") return "names";
  if (["integer", "number", "boolean", "string"].includes(main.type)) return main.type;
  return "json"; // objects and anything richer: edited as JSON text
}

function stringSpec(spec) {
  return (spec.anyOf || [spec]).find((v) => v.type === "string") || {};
}

function field(name, spec, value) {
  const id = `policy-${name}`;
  const label = LABELS[name] || spec.title || name;
  const kind = kindOf(spec);
  if (name === "allowed_processors") {
    return h("fieldset", { class: "checks wide" }, h("legend", {}, "Allowed processors"),
      KNOWN_PROCESSORS.map((processor) => h("label", {},
        h("input", {
          type: "checkbox", name: "allowed_processors", value: processor,
          checked: value.includes(processor),
        }), ` ${processor}`)));
  }
  if (kind === "boolean") {
    return h("label", { class: "check" }, h("input", { type: "checkbox", id, name, checked: value }), ` ${label}`);
  }
  if (kind === "enum") {
    return h("div", {}, h("label", { for: id }, label),
      h("select", { id, name }, spec.enum.map((option) =>
        h("option", { value: option, selected: option === value }, option))));
  }
  if (kind === "integer" || kind === "number") {
    return h("div", {}, h("label", { for: id }, label),
      h("input", {
        id, name, type: "number", step: kind === "integer" ? 1 : "any", min: spec.minimum,
        max: spec.maximum, required: true, value, inputmode: kind === "integer" ? "numeric" : "decimal",
      }));
  }
  if (kind === "string") {
    const text = stringSpec(spec);
    return h("div", {}, h("label", { for: id }, label),
      h("input", {
        // No pattern attribute: browsers compile it with the "v" flag, which rejects some
        // of the server's patterns; the server's 422 detail says what is wrong instead.
        id, name, value: value ?? "", required: !spec.anyOf, maxlength: text.maxLength,
      }));
  }
  if (kind === "names") {
    return h("div", { class: "wide" }, h("label", { for: id }, `${label} (comma-separated)`),
      h("input", { id, name, value: (value || []).join(", ") }));
  }
  return h("div", { class: "wide" }, h("label", { for: id }, `${label} (JSON)`),
    h("textarea", { id, name, rows: 2, spellcheck: "false", "data-json": "true" },
      JSON.stringify(value ?? {})));
}

function renderPolicy(schema, policy) {
  $("#policy-fields").replaceChildren(...Object.entries(schema).map(([name, spec]) =>
    field(name, spec, policy[OUTPUT_NAMES[name] || name])));
  showError($("#policy-error"), "");
}

function readPolicy(schema) {
  const body = {};
  for (const [name, spec] of Object.entries(schema)) {
    if (name === "allowed_processors") {
      body[name] = [...document.querySelectorAll('#policy-fields input[name="allowed_processors"]:checked')]
        .map((input) => input.value);
      continue;
    }
    const input = document.getElementById(`policy-${name}`);
    const kind = kindOf(spec);
    if (kind === "boolean") body[name] = input.checked;
    else if (kind === "integer" || kind === "number") body[name] = Number(input.value);
    else if (kind === "enum") body[name] = input.value;
    else if (kind === "string") body[name] = input.value.trim() || (spec.anyOf ? null : "");
    else if (kind === "names") body[name] = input.value.split(",").map((item) => item.trim()).filter(Boolean);
    else body[name] = JSON.parse(input.value || "{}");
  }
  return body;
}

async function savePolicy(event) {
  event.preventDefault();
  const error = $("#policy-error");
  const invalid = [...document.querySelectorAll("#policy-fields input, #policy-fields textarea")]
    .find((input) => !input.checkValidity() || (input.dataset.json && !isJson(input.value)));
  if (invalid) {
    const label = document.querySelector(`label[for="${invalid.id}"]`);
    const why = invalid.validationMessage || "not valid JSON";
    showError(error, `${label ? label.textContent : invalid.name}: ${why}`);
    invalid.focus();
    return;
  }
  try {
    const schema = await policySchema();
    const policy = await api(`/v1/admin/tenants/${encodeURIComponent(state.selected)}/policy`, {
      method: "PUT", json: readPolicy(schema),
    });
    renderPolicy(schema, policy);
    announce(`Policy of ${state.selected} saved.`);
    await loadAudit();
  } catch (failure) {
    showError(error, failure.message);
  }
}

function isJson(text) {
  try {
    JSON.parse(text || "{}");
    return true;
  } catch {
    return false;
  }
}

function keyState(key) {
  if (key.revoked_at) return "revoked";
  if (key.expires_at && new Date(key.expires_at) <= new Date()) return "expired";
  return "active";
}

function renderKeys(keys) {
  $("#key-table tbody").replaceChildren(...keys.map((key) => {
    const status = keyState(key);
    return h("tr", {},
      h("th", { scope: "row" }, key.name || h("span", { class: "muted" }, "(unnamed)"), h("br"),
        h("code", { class: "small" }, key.id)),
      h("td", {}, key.scopes.join(", ")),
      h("td", {}, h("span", { class: `badge status-${status}` }, status),
        h("div", { class: "muted small" }, `last used ${key.last_used_at ? formatTime(key.last_used_at) : "never"}`)),
      h("td", {}, status === "active"
        ? h("button", {
          type: "button", class: "danger", onclick: () => revokeKey(key),
          "aria-label": `Revoke key ${key.name || key.id}`,
        }, "Revoke")
        : null));
  }));
}

async function createKey(event) {
  event.preventDefault();
  const error = $("#key-error");
  const scopes = [...document.querySelectorAll('#key-form input[name="scope"]:checked')].map((i) => i.value);
  if (!scopes.length) {
    showError(error, "Choose at least one scope.");
    return;
  }
  try {
    const created = await api(`/v1/admin/tenants/${encodeURIComponent(state.selected)}/keys`, {
      method: "POST", json: { name: $("#key-name").value.trim(), scopes },
    });
    showError(error, "");
    $("#key-name").value = "";
    renderKeys(await api(`/v1/admin/tenants/${encodeURIComponent(state.selected)}/keys`));
    $("#new-secret-value").textContent = created.token;
    $("#new-secret").hidden = false;
    $("#copy-secret").focus();
    announce("Key created. Copy it now: it is not shown again.");
    await loadAudit();
  } catch (failure) {
    showError(error, failure.message);
  }
}

async function revokeKey(key) {
  if (!window.confirm(`Revoke key ${key.name || key.id}? Clients using it stop working at once.`)) return;
  try {
    await api(`/v1/admin/tenants/${encodeURIComponent(key.tenant_id)}/keys/${encodeURIComponent(key.id)}`, { method: "DELETE" });
    renderKeys(await api(`/v1/admin/tenants/${encodeURIComponent(key.tenant_id)}/keys`));
    announce("Key revoked.");
    await loadAudit();
  } catch (failure) {
    flashMessage(failure.message);
  }
}

async function loadUsage() {
  const card = $("#admin-usage-card");
  try {
    card.hidden = !(await renderTenantUsage($("#admin-usage")));
  } catch (error) {
    card.hidden = false;
    $("#admin-usage").replaceChildren(h("p", { class: "error-text" }, error.message));
  }
}

/** The verification state: from the server when it offers one, else said plainly. */
async function verification() {
  try {
    const result = await api("/v1/audit/verify");
    if (result.ok) return { kind: "ok", text: `Chain verified: ${result.rows} events intact` };
    const first = (result.problems || [])[0];
    return { kind: "bad", text: `Chain broken${first ? ` at event ${first.seq}: ${first.kind}` : ""}` };
  } catch (error) {
    if (error instanceof ApiError && (error.status === 404 || error.status === 405)) {
      return { kind: "unknown", text: "Not verified here: run “facegate audit verify”" };
    }
    return { kind: "unknown", text: `Verification unavailable: ${error.message}` };
  }
}

async function loadAudit() {
  const card = $("#audit-card");
  let page;
  try {
    page = await api("/v1/audit?limit=1000");
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) {
      card.hidden = true; // this server has no audit API
      return;
    }
    throw error;
  }
  card.hidden = false;
  const latest = page.events.slice(-50).reverse();
  if (!latest.length) {
    $("#audit-table tbody").replaceChildren(
      h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No audit events yet.")));
  } else $("#audit-table tbody").replaceChildren(...latest.map((event) => h("tr", {},
    h("td", {}, formatTime(event.created_at)),
    h("td", {}, event.actor),
    h("td", {}, event.tenant_id || "–"),
    h("td", {}, h("code", {}, event.action)),
    h("td", {}, event.target))));
  const result = await verification();
  const badge = $("#audit-state");
  badge.textContent = result.text;
  badge.className = `badge verify-${result.kind}`;
}

export function initAdmin() {
  $("#tenant-form").addEventListener("submit", createTenant);
  $("#policy-form").addEventListener("submit", savePolicy);
  $("#key-form").addEventListener("submit", createKey);
  $("#copy-secret").addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText($("#new-secret-value").textContent);
      announce("Copied.");
    } catch {
      announce("Copy failed: select the key and copy it by hand.");
    }
  });
}
