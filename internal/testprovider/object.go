package testprovider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
)

// objectResource is kltest_object: an object of the fake cloud API. Every
// Create, Read, Update and Delete waits its delay first (a cloud API's
// latency); it can be imported by id; its schema version is the provider's
// (EnvSchemaVersion), with an upgrader from version 0 to 1.
type objectResource struct {
	version int64
	data    *providerData
}

var (
	_ resource.ResourceWithConfigure      = (*objectResource)(nil)
	_ resource.ResourceWithImportState    = (*objectResource)(nil)
	_ resource.ResourceWithUpgradeState   = (*objectResource)(nil)
	_ resource.ResourceWithValidateConfig = (*objectResource)(nil)
)

// objectModel is kltest_object's state (both schema versions: only the
// encoding of created_at differs).
type objectModel struct {
	ID          types.String `tfsdk:"id"`
	Name        types.String `tfsdk:"name"`
	Delay       types.String `tfsdk:"delay"`
	Secret      types.String `tfsdk:"secret"`
	Settings    types.Object `tfsdk:"settings"`
	Rules       types.List   `tfsdk:"rule"`
	Fingerprint types.String `tfsdk:"fingerprint"`
	CreatedAt   types.String `tfsdk:"created_at"`
}

type settingsModel struct {
	Size   types.Int64 `tfsdk:"size"`
	Labels types.Map   `tfsdk:"labels"`
}

type ruleModel struct {
	Port types.Int64  `tfsdk:"port"`
	CIDR types.String `tfsdk:"cidr"`
}

var (
	settingsTypes = map[string]attr.Type{"size": types.Int64Type, "labels": types.MapType{ElemType: types.StringType}}
	ruleTypes     = map[string]attr.Type{"port": types.Int64Type, "cidr": types.StringType}
)

func (r *objectResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_object"
}

func (r *objectResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = objectSchema(r.version)
}

// objectSchema is kltest_object's schema at version v.
func objectSchema(v int64) schema.Schema {
	created := "When the API created the object, in Unix seconds (schema version 0)."
	if v >= 1 {
		created = "When the API created the object, RFC 3339 in UTC (schema version 1; version 0 had Unix seconds)."
	}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	return schema.Schema{
		Version:     v,
		Description: "An object of the fake cloud API.",
		Attributes: map[string]schema.Attribute{
			"id":   schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "The API's id (16 hex digits)."},
			"name": schema.StringAttribute{Required: true},
			"delay": schema.StringAttribute{Optional: true,
				Description: `How long each API call on the object takes (a Go duration, e.g. "200ms"): create, read, update, delete.`},
			"secret": schema.StringAttribute{Optional: true, Sensitive: true},
			"settings": schema.SingleNestedAttribute{Optional: true, Attributes: map[string]schema.Attribute{
				"size":   schema.Int64Attribute{Optional: true},
				"labels": schema.MapAttribute{Optional: true, ElementType: types.StringType},
			}},
			"fingerprint": schema.StringAttribute{Computed: true, Description: "A hash of name, settings and rules."},
			"created_at":  schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: created},
		},
		Blocks: map[string]schema.Block{
			"rule": schema.ListNestedBlock{NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
				"port": schema.Int64Attribute{Required: true},
				"cidr": schema.StringAttribute{Required: true},
			}}},
		},
	}
}

func (r *objectResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if req.ProviderData == nil {
		return // not configured yet (validation)
	}
	pd, ok := req.ProviderData.(*providerData)
	if !ok {
		resp.Diagnostics.AddError("Unexpected provider data", fmt.Sprintf("%T", req.ProviderData))
		return
	}
	r.data = pd
}

func (r *objectResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var d types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("delay"), &d)...)
	if _, err := parseDelay(d); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("delay"), "Invalid delay", err.Error())
	}
}

// parseDelay reads a delay attribute: null or unknown is 0; else a
// non-negative Go duration.
func parseDelay(v types.String) (time.Duration, error) {
	if v.IsNull() || v.IsUnknown() {
		return 0, nil
	}
	d, err := time.ParseDuration(v.ValueString())
	if err != nil || d < 0 {
		return 0, fmt.Errorf("delay %q is not a duration of 0 or more (e.g. \"200ms\", \"2s\")", v.ValueString())
	}
	return d, nil
}

func (r *objectResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m objectModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	o, delay, diags := m.toObject(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	o, err := r.data.api.create(ctx, o, delay)
	if err != nil {
		resp.Diagnostics.AddError("Creating object", err.Error())
		return
	}
	m.ID = types.StringValue(o.ID)
	m.Fingerprint = types.StringValue(o.fingerprint())
	m.CreatedAt = types.StringValue(createdAt(o.CreatedAt, r.version))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *objectResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m objectModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	delay, _ := parseDelay(m.Delay) // validated when configured; an imported object has none yet
	o, err := r.data.api.get(ctx, m.ID.ValueString(), delay)
	if errors.Is(err, errNotFound) {
		resp.State.RemoveResource(ctx) // deleted outside Terraform
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading object", err.Error())
		return
	}
	read, diags := fromObject(ctx, o, r.version)
	resp.Diagnostics.Append(diags...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &read)...)
	}
}

func (r *objectResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m, prior objectModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	o, delay, diags := m.toObject(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	o.ID = prior.ID.ValueString()
	o, err := r.data.api.update(ctx, o, delay)
	if err != nil {
		resp.Diagnostics.AddError("Updating object", err.Error())
		return
	}
	m.ID = prior.ID
	m.Fingerprint = types.StringValue(o.fingerprint())
	m.CreatedAt = types.StringValue(createdAt(o.CreatedAt, r.version))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *objectResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m objectModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	delay, _ := parseDelay(m.Delay)
	if err := r.data.api.delete(ctx, m.ID.ValueString(), delay); err != nil {
		resp.Diagnostics.AddError("Deleting object", err.Error())
	}
}

// ImportState takes the object's id (`terraform import ADDR ID`, an import
// block); Read then fills every attribute from the API.
func (r *objectResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}

// UpgradeState upgrades a version 0 object to version 1 (created_at from
// Unix seconds to RFC 3339) when the provider runs at version 1; at
// version 0 there is nothing to upgrade from.
func (r *objectResource) UpgradeState(context.Context) map[int64]resource.StateUpgrader {
	if r.version < 1 {
		return nil
	}
	prior := objectSchema(0)
	return map[int64]resource.StateUpgrader{0: {PriorSchema: &prior, StateUpgrader: upgradeV0}}
}

// upgradeV0 rewrites created_at from Unix seconds to RFC 3339; every other
// attribute is kept as it was.
func upgradeV0(ctx context.Context, req resource.UpgradeStateRequest, resp *resource.UpgradeStateResponse) {
	var m objectModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !m.CreatedAt.IsNull() {
		sec, err := strconv.ParseInt(m.CreatedAt.ValueString(), 10, 64)
		if err != nil {
			resp.Diagnostics.AddError("Upgrading kltest_object from schema version 0",
				fmt.Sprintf("created_at %q is not Unix seconds: %v", m.CreatedAt.ValueString(), err))
			return
		}
		m.CreatedAt = types.StringValue(createdAt(time.Unix(sec, 0), 1))
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// createdAt encodes t as schema version v stores it.
func createdAt(t time.Time, v int64) string {
	if v >= 1 {
		return t.UTC().Format(time.RFC3339)
	}
	return strconv.FormatInt(t.Unix(), 10)
}

// toObject is the API object m describes (no id) and m's delay.
func (m objectModel) toObject(ctx context.Context) (object, time.Duration, diag.Diagnostics) {
	var diags diag.Diagnostics
	delay, err := parseDelay(m.Delay)
	if err != nil {
		diags.AddAttributeError(path.Root("delay"), "Invalid delay", err.Error())
		return object{}, 0, diags
	}
	o := object{Name: m.Name.ValueString(), Delay: m.Delay.ValueStringPointer(), Secret: m.Secret.ValueStringPointer(), Rules: []rule{}}
	if !m.Settings.IsNull() {
		var s settingsModel
		diags.Append(m.Settings.As(ctx, &s, basetypes.ObjectAsOptions{})...)
		o.Settings = &settings{Size: s.Size.ValueInt64Pointer()}
		if !s.Labels.IsNull() {
			o.Settings.Labels = map[string]string{}
			diags.Append(s.Labels.ElementsAs(ctx, &o.Settings.Labels, false)...)
		}
	}
	var rules []ruleModel
	diags.Append(m.Rules.ElementsAs(ctx, &rules, false)...)
	for _, rm := range rules {
		o.Rules = append(o.Rules, rule{Port: rm.Port.ValueInt64(), CIDR: rm.CIDR.ValueString()})
	}
	return o, delay, diags
}

// fromObject is the state of o at schema version v.
func fromObject(ctx context.Context, o object, v int64) (objectModel, diag.Diagnostics) {
	var diags, d diag.Diagnostics
	m := objectModel{
		ID: types.StringValue(o.ID), Name: types.StringValue(o.Name),
		Delay: types.StringPointerValue(o.Delay), Secret: types.StringPointerValue(o.Secret),
		Settings:    types.ObjectNull(settingsTypes),
		Fingerprint: types.StringValue(o.fingerprint()), CreatedAt: types.StringValue(createdAt(o.CreatedAt, v)),
	}
	if o.Settings != nil {
		s := settingsModel{Size: types.Int64PointerValue(o.Settings.Size), Labels: types.MapNull(types.StringType)}
		if o.Settings.Labels != nil {
			s.Labels, d = types.MapValueFrom(ctx, types.StringType, o.Settings.Labels)
			diags.Append(d...)
		}
		m.Settings, d = types.ObjectValueFrom(ctx, settingsTypes, s)
		diags.Append(d...)
	}
	rules := make([]ruleModel, 0, len(o.Rules))
	for _, r := range o.Rules {
		rules = append(rules, ruleModel{Port: types.Int64Value(r.Port), CIDR: types.StringValue(r.CIDR)})
	}
	m.Rules, d = types.ListValueFrom(ctx, types.ObjectType{AttrTypes: ruleTypes}, rules)
	diags.Append(d...)
	return m, diags
}

// fingerprint is a hash of o's name, settings and rules (16 hex digits).
func (o object) fingerprint() string {
	b, _ := json.Marshal(struct {
		Name     string    `json:"name"`
		Settings *settings `json:"settings"`
		Rules    []rule    `json:"rules"`
	}{o.Name, o.Settings, o.Rules}) // plain data: always encodes
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
