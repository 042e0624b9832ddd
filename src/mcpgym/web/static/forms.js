// Forms generated from a tool's JSON Schema (inputSchema): strings (multi-line for code-like
// fields), numbers with bounds, booleans, enums as selects, arrays, nested objects, optional and
// nullable fields, defaults, $ref/$defs. Each field object has: el, read(errors) -> {present,
// value} (pushing client-side validation errors), write(value). The server validates again.
"use strict";

const MULTILINE = /(code|source|program|script|content|text|body|patch|diff|prompt|query)s?$/i;

function resolveSchema(schema, root) {
  let s = schema || {};
  for (let depth = 0; s.$ref && depth < 32; depth++) {
    const name = s.$ref.replace(/^#\/(\$defs|definitions)\//, "");
    const target = (root.$defs || {})[name] || (root.definitions || {})[name] || {};
    const { $ref, ...rest } = s;
    s = { ...target, ...rest };
  }
  if (s.allOf && s.allOf.length === 1) {
    const { allOf, ...rest } = s;
    s = { ...resolveSchema(allOf[0], root), ...rest };
  }
  return s;
}

// `T | None`: the non-null branch, marked nullable.
function unwrapNullable(schema, root) {
  const branches = schema.anyOf || schema.oneOf;
  if (!branches) return schema;
  const others = branches.filter((b) => resolveSchema(b, root).type !== "null");
  if (others.length === 1 && others.length < branches.length) {
    const { anyOf, oneOf, ...rest } = schema;
    return { ...resolveSchema(others[0], root), ...rest, nullable: true };
  }
  return schema;
}

function typeOf(schema) {
  if (schema.enum || schema.const !== undefined) return "enum";
  const t = Array.isArray(schema.type) ? schema.type.filter((x) => x !== "null")[0] : schema.type;
  if (t) return t;
  if (schema.properties) return "object";
  if (schema.items) return "array";
  return "json";
}

function buildField(name, rawSchema, root, required, path) {
  const schema = unwrapNullable(resolveSchema(rawSchema, root), root);
  const kind = typeOf(schema);
  const builder = { enum: enumField, string: stringField, integer: numberField, number: numberField,
    boolean: booleanField, array: arrayField, object: objectField }[kind] || jsonField;
  if (kind === "object" && !schema.properties) return wrap(name, schema, required, path, jsonField(schema, root, path), kind);
  return wrap(name, schema, required, path, builder(schema, root, path, required), kind);
}

// Label, description, error slot; an optional field with no value is left out of the call.
function wrap(name, schema, required, path, inner, kind) {
  const hint = [kind === "json" ? "JSON" : kind, schema.format, schema.nullable ? "nullable" : null].filter(Boolean).join(", ");
  const error = h("div", { class: "field-error", role: "alert" });
  const label = name === null ? null : h("label", { class: "field-label", for: inner.id },
    name, required ? h("span", { class: "required", title: "required" }, " *") : null, h("span", { class: "hint" }, " " + hint));
  const el = h("div", { class: "field field-" + kind, "data-path": path }, label, inner.el,
    schema.description ? h("div", { class: "description" }, schema.description) : null, error);
  return {
    el,
    read(errors) {
      error.textContent = "";
      const mine = [];
      const out = inner.read(mine);
      if (!out.present && required && schema.default === undefined) {
        if (schema.nullable) return { present: true, value: null };
        mine.push("required");
      }
      if (mine.length) {
        error.textContent = mine.join("; ");
        errors.push(...mine.map((m) => `${path || name}: ${m}`));
      }
      return out;
    },
    write: inner.write,
  };
}

let fieldCounter = 0;
function nextId() {
  return "f" + ++fieldCounter;
}

function enumField(schema, root, path, required) {
  const values = schema.enum || [schema.const];
  const id = nextId();
  const select = h("select", { id, name: path },
    // A blank choice only where leaving the field out is allowed and means something.
    !required && (schema.default === undefined || schema.default === null) ? h("option", { value: "" }, "(not set)") : null,
    values.map((v, i) => h("option", { value: String(i) }, typeof v === "string" ? v : JSON.stringify(v))));
  const write = (value) => {
    const i = values.findIndex((v) => JSON.stringify(v) === JSON.stringify(value));
    select.value = i >= 0 ? String(i) : "";
  };
  if (schema.default !== undefined) write(schema.default);
  return {
    id, el: select, write,
    read() {
      return select.value === "" ? { present: false } : { present: true, value: values[Number(select.value)] };
    },
  };
}

function stringField(schema, root, path) {
  const id = nextId();
  const name = path.split(".").pop();
  const multiline = MULTILINE.test(name) || (schema.maxLength || 0) > 200 || schema.format === "textarea";
  const attrs = { id, name: path, minlength: schema.minLength, maxlength: schema.maxLength, spellcheck: multiline ? "false" : null };
  const input = multiline ? h("textarea", { ...attrs, rows: 8, class: "code" }) : h("input", { ...attrs, type: "text" });
  if (schema.pattern) input.setAttribute("pattern", schema.pattern);
  const write = (value) => { input.value = value === null || value === undefined ? "" : String(value); };
  if (schema.default !== undefined && schema.default !== null) write(schema.default);
  return {
    id, el: input, write,
    read(errors) {
      const value = input.value;
      if (value === "" && !(schema.minLength === 0)) return { present: false };
      if (schema.minLength !== undefined && value.length < schema.minLength) errors.push(`at least ${schema.minLength} characters`);
      if (schema.maxLength !== undefined && value.length > schema.maxLength) errors.push(`at most ${schema.maxLength} characters`);
      if (schema.pattern) {
        try {
          if (!new RegExp(schema.pattern, "u").test(value)) errors.push(`must match ${schema.pattern}`);
        } catch (e) { /* a pattern JS cannot compile: the server checks it */ }
      }
      return { present: true, value };
    },
  };
}

function numberField(schema, root, path) {
  const id = nextId();
  const integer = typeOf(schema) === "integer";
  const input = h("input", { id, name: path, type: "number", step: integer ? "1" : "any", min: schema.minimum, max: schema.maximum });
  const write = (value) => { input.value = value === null || value === undefined ? "" : String(value); };
  if (schema.default !== undefined && schema.default !== null) write(schema.default);
  const bounds = [];
  if (schema.minimum !== undefined) bounds.push(`≥ ${schema.minimum}`);
  if (schema.exclusiveMinimum !== undefined) bounds.push(`> ${schema.exclusiveMinimum}`);
  if (schema.maximum !== undefined) bounds.push(`≤ ${schema.maximum}`);
  if (schema.exclusiveMaximum !== undefined) bounds.push(`< ${schema.exclusiveMaximum}`);
  if (bounds.length) input.setAttribute("placeholder", bounds.join(", "));
  return {
    id, el: input, write,
    read(errors) {
      const text = input.value.trim();
      if (text === "") {
        if (input.validity.badInput) errors.push("not a number");
        return { present: false };
      }
      const value = Number(text);
      if (!Number.isFinite(value)) { errors.push("not a number"); return { present: false }; }
      if (integer && !Number.isInteger(value)) errors.push("must be a whole number");
      if (schema.minimum !== undefined && value < schema.minimum) errors.push(`must be ≥ ${schema.minimum}`);
      if (schema.maximum !== undefined && value > schema.maximum) errors.push(`must be ≤ ${schema.maximum}`);
      if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) errors.push(`must be > ${schema.exclusiveMinimum}`);
      if (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum) errors.push(`must be < ${schema.exclusiveMaximum}`);
      if (schema.multipleOf !== undefined && Math.abs(value / schema.multipleOf - Math.round(value / schema.multipleOf)) > 1e-9) errors.push(`must be a multiple of ${schema.multipleOf}`);
      return { present: true, value };
    },
  };
}

function booleanField(schema, root, path, required) {
  const id = nextId();
  if (!required && schema.default === undefined) {
    // Three states: left out, true, false.
    return enumField({ ...schema, enum: [true, false] }, root, path, false);
  }
  const input = h("input", { id, name: path, type: "checkbox" });
  const write = (value) => { input.checked = Boolean(value); };
  write(schema.default);
  return { id, el: input, write, read() { return { present: true, value: input.checked }; } };
}

function arrayField(schema, root, path) {
  const id = nextId();
  const itemSchema = schema.items || {};
  const list = h("ol", { class: "array-items" });
  const items = [];
  const add = (value) => {
    const field = buildField(null, itemSchema, root, true, `${path}[${items.length}]`);
    const row = h("li", {}, field.el, h("button", { type: "button", class: "small remove", title: "remove item",
      onclick: () => { items.splice(items.indexOf(entry), 1); row.remove(); } }, "✕"));
    const entry = { field, row };
    items.push(entry);
    list.append(row);
    if (value !== undefined) field.write(value);
  };
  const write = (values) => {
    items.splice(0).forEach((e) => e.row.remove());
    for (const v of Array.isArray(values) ? values : []) add(v);
  };
  if (Array.isArray(schema.default)) write(schema.default);
  const el = h("div", { class: "array", id }, list, h("button", { type: "button", class: "small add", onclick: () => add() }, "+ add item"));
  return {
    id, el, write,
    read(errors) {
      const value = items.map((e) => e.field.read(errors)).map((r) => (r.present ? r.value : null));
      if (!value.length && schema.default !== undefined) return { present: false };
      if (schema.minItems !== undefined && value.length < schema.minItems) errors.push(`at least ${schema.minItems} items`);
      if (schema.maxItems !== undefined && value.length > schema.maxItems) errors.push(`at most ${schema.maxItems} items`);
      if (schema.uniqueItems && new Set(value.map((v) => JSON.stringify(v))).size !== value.length) errors.push("items must be unique");
      return { present: true, value };
    },
  };
}

function objectField(schema, root, path) {
  const id = nextId();
  const required = new Set(schema.required || []);
  const fields = Object.entries(schema.properties || {}).map(([name, sub]) =>
    [name, buildField(name, sub, root, required.has(name), path ? `${path}.${name}` : name)]);
  const el = h("fieldset", { class: "object", id }, fields.map(([, f]) => f.el));
  const write = (value) => {
    for (const [name, field] of fields) field.write(value && typeof value === "object" ? value[name] : undefined);
  };
  return {
    id, el, write, fields,
    read(errors) {
      const value = {};
      for (const [name, field] of fields) {
        const out = field.read(errors);
        if (out.present) value[name] = out.value;
      }
      return { present: Object.keys(value).length > 0 || required.size > 0, value };
    },
  };
}

function jsonField(schema, root, path) {
  const id = nextId();
  const area = h("textarea", { id, name: path, rows: 3, class: "code", placeholder: "JSON" });
  const write = (value) => { area.value = value === undefined ? "" : JSON.stringify(value, null, 2); };
  if (schema.default !== undefined) write(schema.default);
  return {
    id, el: area, write,
    read(errors) {
      if (area.value.trim() === "") return { present: false };
      try {
        return { present: true, value: JSON.parse(area.value) };
      } catch (e) {
        errors.push("not valid JSON");
        return { present: false };
      }
    },
  };
}

// The whole arguments object of a tool.
function toolArgumentsForm(inputSchema) {
  const root = inputSchema || { type: "object" };
  const form = objectField(resolveSchema(root, root), root, "");
  return {
    el: form.el,
    read(errors) { return form.read(errors).value; },
    write(value) { form.write(value); },
    empty: !(form.fields || []).length,
  };
}
