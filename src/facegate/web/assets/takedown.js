// The admin's takedown cases: each case with its clock (reported → removed, against the 48 h
// the TAKE IT DOWN Act allows; amber past 24 h, red past 36 h, when the alert fires), what
// its match found (jobs and saved faces, with the recogniser's distance), and the two steps
// an operator takes: find the face across tenants, then remove (docs/takedown.md).

import { ApiError, api, upload } from "./api.js";
import { $, announce, formatTime, h, showError } from "./dom.js";

const HOUR = 3600;
// What else the admin view refreshes after a step (its audit log).
let refreshOthers = async () => {};

function clock(item) {
  const hours = item.elapsed_seconds / HOUR;
  const limit = item.deadline_seconds / HOUR;
  const kind = item.removed_at ? "ok" : hours >= 36 ? "bad" : hours >= 24 ? "warn" : "ok";
  const text = item.removed_at
    ? `removed after ${hours.toFixed(1)} h`
    : `${hours.toFixed(1)} h of ${limit} h`;
  return h("span", { class: `badge clock-${kind}` }, text);
}

function matches(item) {
  if (!item.matches.length) return h("span", { class: "muted" }, "–");
  const jobs = item.matches.filter((m) => m.kind === "job").length;
  const faces = item.matches.length - jobs;
  const nearest = Math.min(...item.matches.map((m) => m.distance));
  return `${jobs} jobs, ${faces} faces (nearest ${nearest.toFixed(2)})`;
}

async function act(item, step) {
  const error = $("#takedown-error");
  error.hidden = true;
  try {
    const path = `/v1/takedown/cases/${encodeURIComponent(item.id)}/${step}`;
    if (step === "match") {
      const form = new FormData();
      form.append("platform", "true");
      await upload(path, form, () => {});
    } else {
      await api(path, { method: "POST" });
    }
    announce(step === "match" ? "Matches found." : "Removed.");
  } catch (failure) {
    showError(error, failure.message);
  }
  await loadTakedown();
  await refreshOthers();
}

/** The cases card; ``onChange`` runs after a find or a removal (the audit log). */
export async function loadTakedown(onChange) {
  if (onChange) refreshOthers = onChange;
  const card = $("#takedown-card");
  let cases;
  try {
    cases = await api("/v1/takedown/cases");
  } catch (error) {
    if (error instanceof ApiError && (error.status === 403 || error.status === 404)) {
      card.hidden = true;
      return;
    }
    throw error;
  }
  card.hidden = false;
  const body = $("#takedown-table tbody");
  if (!cases.length) {
    body.replaceChildren(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No cases.")));
    return;
  }
  body.replaceChildren(...cases.map((item) => {
    const open = item.status === "open";
    const find = h("button", { type: "button", class: "secondary" }, "Find across tenants");
    const remove = h("button", { type: "button", class: "danger" }, "Remove");
    find.addEventListener("click", () => act(item, "match"));
    remove.addEventListener("click", () => act(item, "remove"));
    remove.disabled = !item.matches.length;
    return h("tr", { "data-case": item.id },
      h("td", {}, formatTime(item.reported_at)),
      h("td", {}, item.tenant_id || "–"),
      h("td", {}, h("span", { class: `badge status-${item.status}` }, item.status)),
      h("td", {}, clock(item)),
      h("td", { class: "takedown-matches" }, matches(item)),
      h("td", {}, ...(open ? [find, " ", remove] : [])));
  }));
}
