// Usage charts: this month's compute seconds per day (tenant view) and per tenant (admin).
// The section appears only when the server answers /v1/usage.

import { ApiError, api } from "./api.js";
import { barChart } from "./chart.js";
import { $, formatBytes, h } from "./dom.js";

function monthStart() {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
}

/** Totals of this month, or null when this server has no usage API (404). */
export async function fetchMonthUsage(query = "") {
  try {
    const from = monthStart().toISOString().replace(/\.\d+Z$/, "Z");
    return await api(`/v1/usage?from=${encodeURIComponent(from)}&group_by=day${query}`);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
}

function daysOfMonth() {
  const start = monthStart();
  const days = [];
  for (let d = new Date(start); d.getUTCMonth() === start.getUTCMonth(); d.setUTCDate(d.getUTCDate() + 1)) {
    days.push(d.toISOString().slice(0, 10));
  }
  return days;
}

const seconds = (value) => value.toFixed(value >= 100 ? 0 : value >= 10 ? 1 : 2);

function summary(totals) {
  const sum = (name) => totals.reduce((total, item) => total + (item[name] || 0), 0);
  const facts = [
    ["Jobs", String(sum("jobs"))],
    ["Compute", `${seconds(sum("compute_seconds"))} s`],
    ["Frames", String(sum("frames"))],
    ["Output", `${(sum("output_pixels") / 1e6).toFixed(1)} MP`],
  ];
  if (totals.some((item) => "output_bytes" in item)) facts.push(["Bytes out", formatBytes(sum("output_bytes"))]);
  return h("dl", { class: "facts" }, facts.map(([name, value]) => h("div", {}, h("dt", {}, name), h("dd", {}, value))));
}

/** The tenant's own month, per day. */
export async function showUsage(me) {
  const card = $("#usage-card");
  const query = me.scopes.includes("admin") ? `&tenant=${encodeURIComponent(me.tenant_id)}` : "";
  let usage;
  try {
    usage = await fetchMonthUsage(query);
  } catch (error) {
    card.replaceChildren(h("p", { class: "error-text", role: "alert" }, error.message));
    return;
  }
  if (usage === null) {
    card.replaceChildren(h("p", { class: "muted" }, "This server does not report usage."));
    return;
  }
  const byDay = new Map(usage.totals.map((item) => [item.day, item]));
  const points = daysOfMonth().map((day) => ({
    label: day,
    shortLabel: String(Number(day.slice(8))),
    value: (byDay.get(day) || {}).compute_seconds || 0,
  }));
  card.replaceChildren(
    summary(usage.totals),
    barChart({ title: "Compute seconds per day", points, format: seconds, unit: " s" }),
  );
  const plan = await planFacts();
  if (plan) card.append(plan);
}

/** The tenant's plan beside its usage (from /v1/capabilities); null when not readable. */
async function planFacts() {
  let limits;
  try {
    limits = (await api("/v1/capabilities")).limits;
  } catch {
    return null;
  }
  const facts = [
    ["Storage", `${formatBytes(limits.storage_used_bytes)} of ${formatBytes(limits.storage_quota_bytes)}`],
    ["Jobs at once", String(limits.max_concurrent_jobs)],
    ["Queue", `${limits.max_queued_jobs} jobs`],
    ["Output up to", limits.max_output_resolution],
    ["Video up to", `${limits.max_video_seconds} s`],
    ["Upload up to", formatBytes(limits.max_input_bytes)],
    ["Kept for", `${limits.retention_days} days`],
  ];
  return h("section", { class: "plan", "aria-labelledby": "plan-title" },
    h("h2", { id: "plan-title" }, "Your plan"),
    h("meter", {
      min: 0, max: limits.storage_quota_bytes, value: limits.storage_used_bytes,
      "aria-label": "Storage used of the quota", class: "storage-meter",
    }),
    h("dl", { class: "facts", id: "plan-facts" },
      facts.map(([name, value]) => h("div", {}, h("dt", {}, name), h("dd", {}, value)))));
}

/** Every tenant's month, one bar per tenant; false when the server has no usage API. */
export async function renderTenantUsage(container) {
  const usage = await fetchMonthUsage();
  if (usage === null) return false;
  const perTenant = new Map();
  for (const item of usage.totals) {
    perTenant.set(item.tenant_id, (perTenant.get(item.tenant_id) || 0) + (item.compute_seconds || 0));
  }
  const points = [...perTenant.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([tenant, value]) => ({ label: tenant, value }));
  container.replaceChildren(
    summary(usage.totals),
    points.length
      ? barChart({ title: "Compute seconds per tenant", points, format: seconds, unit: " s", noun: "tenants" })
      : h("p", { class: "muted" }, "No finished jobs this month."),
  );
  return true;
}
